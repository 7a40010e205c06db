import type { Middleware } from "h3";
import { z } from "zod";
import { get, noContent, notFound, put, type Controller, type Repository, type Route } from "../../src/index.js";
import type { SQLDatabase, SQLValue } from "../../src/entries/sql.js";
import type { Book } from "./books.js";

/** The largest cover image, bytes. */
export const MAX_COVER_BYTES = 2 * 1024 * 1024;
const COVER_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"];

const BookId = z.object({ id: z.string().min(1).max(64) });
const CoverUpload = z.object({
  cover: z.file().max(MAX_COVER_BYTES).mime(COVER_TYPES).describe("The cover image: PNG, JPEG, WebP or GIF, up to 2 MiB"),
}).meta({ id: "CoverUpload" });

/** Cover images in the bookstore's database (a BLOB in SQLite, a BYTEA in PostgreSQL), one per book. */
export class CoverStore {
  readonly #db: SQLDatabase;
  #ready: Promise<void> | undefined;

  constructor(db: SQLDatabase) {
    this.#db = db;
  }

  /** `?` in SQLite, `$n` in PostgreSQL. */
  #sql(text: string): string {
    let n = 0;
    return this.#db.dialect === "postgres" ? text.replace(/\?/g, () => `$${++n}`) : text;
  }

  /** Creates the table if it is missing: once per database, whatever the number of workers. */
  init(): Promise<void> {
    const bytes = this.#db.dialect === "postgres" ? "BYTEA" : "BLOB";
    this.#ready ??= this.#db.migrate(async (tx) => {
      await tx.query(`CREATE TABLE IF NOT EXISTS book_covers (book_id TEXT PRIMARY KEY, content_type TEXT NOT NULL, data ${bytes} NOT NULL)`);
    });
    return this.#ready;
  }

  async save(signal: AbortSignal, bookId: string, contentType: string, data: Uint8Array): Promise<void> {
    const params: SQLValue[] = [bookId, contentType, data];
    await this.#db.query(this.#sql("INSERT INTO book_covers (book_id, content_type, data) VALUES (?, ?, ?) "
      + "ON CONFLICT (book_id) DO UPDATE SET content_type = excluded.content_type, data = excluded.data"), params, signal);
  }

  async find(signal: AbortSignal, bookId: string): Promise<{ contentType: string; data: Uint8Array } | undefined> {
    const [row] = await this.#db.query<{ content_type: string; data: Uint8Array }>(this.#sql("SELECT content_type, data FROM book_covers WHERE book_id = ?"), [bookId], signal);
    return row && { contentType: row.content_type, data: row.data };
  }

  async delete(signal: AbortSignal, bookId: string): Promise<void> {
    await this.#db.query(this.#sql("DELETE FROM book_covers WHERE book_id = ?"), [bookId], signal);
  }
}

/** `PUT` and `GET /books/:id/cover`: a multipart upload of one image, and the same bytes back. */
export class CoversController implements Controller {
  readonly #books: Repository<Book, string>;
  readonly #covers: CoverStore;
  readonly #writer: Middleware;

  constructor(books: Repository<Book, string>, covers: CoverStore, writer: Middleware) {
    this.#books = books;
    this.#covers = covers;
    this.#writer = writer;
  }

  routes(): Route[] {
    const books = this.#books;
    const covers = this.#covers;
    return [
      put("/books/:id/cover", {
        params: BookId, body: CoverUpload, bodyType: "form",
        // The image plus the multipart framing around it.
        bodyLimit: MAX_COVER_BYTES + 16 * 1024, formLimits: { files: 1, fields: 0 },
        responses: { 204: { description: "Stored" }, 404: { description: "No book with this id" } },
      }, async (ctx) => {
        const signal = ctx.event.req.signal;
        if (!(await books.findById(signal, ctx.params.id))) throw notFound(`no book with id ${ctx.params.id}`);
        const { cover } = ctx.body;
        await covers.save(signal, ctx.params.id, cover.type, new Uint8Array(await cover.arrayBuffer()));
        return noContent();
      })
        .use(this.#writer)
        .tag("books")
        .describe("Upload a book's cover", "`multipart/form-data` with one file field, `cover`: a PNG, JPEG, WebP or GIF image up to 2 MiB."),
      get("/books/:id/cover", {
        params: BookId,
        responses: { 200: { description: "The image, with its content type", contentType: COVER_TYPES }, 404: { description: "No book with this id, or no cover" } },
      }, async (ctx) => {
        const cover = await covers.find(ctx.event.req.signal, ctx.params.id);
        if (!cover) throw notFound(`no cover for book ${ctx.params.id}`);
        return new Response(new Uint8Array(cover.data), { headers: { "content-type": cover.contentType, "cache-control": "no-cache", "x-content-type-options": "nosniff" } });
      })
        .tag("books")
        .describe("Get a book's cover"),
    ];
  }
}
