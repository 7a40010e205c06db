export type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";
export { defineDatabaseModule, defineSQLHealthChecker, type SQLHealthCheckerOptions } from "./module.js";
export { openPostgres, type PostgresOptions } from "./postgres.js";
export { defineSQLRateLimitStore, type SQLRateLimitStoreOptions } from "../rate-limit/sql-store.js";
export { defineSQLRepository, type ColumnType, type SQLRepository, type SQLRepositoryOptions } from "./repository.js";
export { defineSQLJobStore, type SQLJobStoreOptions } from "../jobs/sql-store.js";
export { openSQLite, type SQLiteOptions } from "./sqlite.js";
