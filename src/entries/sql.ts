export type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "../sql/database.js";
export { createDatabaseModule, createSQLHealthChecker, type SQLHealthCheckerOptions } from "../sql/module.js";
export { openPostgres, type PostgresOptions } from "../sql/postgres.js";
export { createSQLRateLimitStore, type SQLRateLimitStoreOptions } from "../rate-limit/sql-store.js";
export { createSQLRepository, type ColumnType, type SQLRepository, type SQLRepositoryOptions } from "../sql/repository.js";
export { createSQLJobStore, type SQLJobStoreOptions } from "../jobs/sql-store.js";
export { openSQLite, type SQLiteOptions } from "../sql/sqlite.js";
export { createSQLIdempotencyStore, type SQLIdempotencyStoreOptions } from "../idempotency/sql-store.js";
