import { randomUUID } from "node:crypto";
import type { Middleware } from "h3";
import { z } from "zod";
import {
  created, del, get, idempotency, notFound, pageOf, pageQuery, post, put, type Controller, type Module, type Repository, type Route,
} from "../../src/index.js";
import { createSQLRepository, type SQLDatabase } from "../../src/entries/sql.js";
import { CoverStore, CoversController } from "./covers.js";

export const Book = z
  .object({
    id: z.string().describe("Identifier: `b1`…`b3` for the seed, a UUID for books added since"),
    title: z.string().min(1).max(200),
    author: z.string().min(1).max(200),
    year: z.number().int().min(0).max(3000).optional(),
  })
  .meta({ id: "Book" });
export type Book = z.infer<typeof Book>;

export const NewBook = Book.omit({ id: true }).meta({ id: "NewBook" });
const BookId = z.object({ id: z.string().min(1).max(64) });
const SEED: Book[] = [
  { id: "b1", title: "The Pragmatic Programmer", author: "Hunt & Thomas", year: 1999 },
  { id: "b2", title: "Designing Data-Intensive Applications", author: "Martin Kleppmann", year: 2017 },
  { id: "b3", title: "Release It!", author: "Michael Nygard", year: 2007 },
];

/**
 * The catalogue table, seeded with three books in the transaction that creates it: once per
 * database, however many workers start at once.
 */
export function defineBooksRepository(db: SQLDatabase) {
  return createSQLRepository<Book>(db, {
    table: "books",
    columns: { id: "text", title: "text", author: "text", year: "integer?" },
    seed: SEED,
  });
}

/** The bookstore's routes on a repository shared by every worker (the database is). */
export class BooksController implements Controller {
  readonly #books: Repository<Book, string>;
  readonly #writer: Middleware;
  readonly #covers: CoverStore | undefined;

  /** `writer` guards the write routes (POST, PUT, DELETE): see auth.ts. A deleted book's cover goes with it. */
  constructor(books: Repository<Book, string>, writer: Middleware, covers?: CoverStore) {
    this.#books = books;
    this.#writer = writer;
    this.#covers = covers;
  }

  routes(): Route[] {
    const books = this.#books;
    const writer = this.#writer;
    const covers = this.#covers;
    return [
      get("/books", { query: pageQuery, responses: { 200: pageOf(Book) } }, (ctx) => books.findAll(ctx.event.req.signal, ctx.query))
        .tag("books")
        .describe("List books", "Offset pagination: out-of-range `page` and `limit` are clamped; non-numbers are a 422."),
      get("/books/:id", { params: BookId, responses: { 200: Book, 404: { description: "No book with this id" } } }, async (ctx) => {
        const book = await books.findById(ctx.event.req.signal, ctx.params.id);
        if (!book) throw notFound(`no book with id ${ctx.params.id}`);
        return book;
      })
        .tag("books")
        .describe("Get one book"),
      post("/books", { body: NewBook, responses: { 201: { schema: Book, description: "The new book; `Location` names it" } } }, async (ctx) => {
        // Unique without coordination: every worker (and pod) creates books at once.
        const book: Book = { id: randomUUID(), ...ctx.body };
        return created(await books.create(ctx.event.req.signal, book), `/api/books/${book.id}`);
      })
        .use(writer)
        // After the writer: keys are per principal. A client that retries with its Idempotency-Key
        // gets the first 201 again, never a second book; keys live in the supervisor's primary
        // (several pods would pass createSQLIdempotencyStore(db)).
        .use(idempotency())
        .tag("books")
        .describe("Add a book", "Send an `Idempotency-Key` (a UUID per book) to retry safely: a repeat gets the first response, marked `Idempotent-Replayed: true`."),
      put("/books/:id", { params: BookId, body: NewBook, responses: { 200: Book, 404: { description: "No book with this id" } } }, async (ctx) => {
        const book = await books.update(ctx.event.req.signal, ctx.params.id, { id: ctx.params.id, ...ctx.body });
        if (!book) throw notFound(`no book with id ${ctx.params.id}`);
        return book;
      })
        .use(writer)
        .tag("books")
        .describe("Replace a book"),
      del("/books/:id", { params: BookId, responses: { 204: { description: "Deleted" }, 404: { description: "No book with this id" } } }, async (ctx) => {
        if (!(await books.delete(ctx.event.req.signal, ctx.params.id))) throw notFound(`no book with id ${ctx.params.id}`);
        await covers?.delete(ctx.event.req.signal, ctx.params.id);
      })
        .use(writer)
        .tag("books")
        .describe("Delete a book"),
    ];
  }
}

/**
 * A module: the books controller on whatever router it gets. Startup waits for the table (created
 * and seeded if missing), so a worker never serves before its schema exists.
 */
export function booksModule(db: SQLDatabase, writer: Middleware): Module {
  return {
    name: "books",
    register(router) {
      const books = defineBooksRepository(db);
      const covers = new CoverStore(db);
      router.registerController(new BooksController(books, writer, covers));
      router.registerController(new CoversController(books, covers, writer));
      return Promise.all([books.init(), covers.init()]).then(() => undefined);
    },
  };
}
