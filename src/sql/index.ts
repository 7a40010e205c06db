export type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";
export { createDatabaseModule, createSQLHealthChecker, type SQLHealthCheckerOptions } from "./module.js";
export { openPostgres, type PostgresOptions } from "./postgres.js";
export { createSQLRateLimitStore, type SQLRateLimitStoreOptions } from "../rate-limit/sql-store.js";
export { createSQLRepository, type ColumnType, type SQLRepository, type SQLRepositoryOptions } from "./repository.js";
export { createSQLJobStore, type SQLJobStoreOptions } from "../jobs/sql-store.js";
export { openSQLite, type SQLiteOptions } from "./sqlite.js";
