import { z } from "zod";
import { created, get, notFound, pageOf, pageQuery, post, type Module } from "keelson";
import { createSQLRepository, type SQLDatabase } from "keelson/sql";

const Note = z.object({ id: z.string(), text: z.string() }).meta({ id: "Note" });
type Note = z.infer<typeof Note>;
const NewNote = z.object({ text: z.string().min(1).max(500) }).meta({ id: "NewNote" });
const NoteId = z.object({ id: z.string().min(1).max(64) });

/** The notes routes, on a table of the database every worker shares (created on first use). */
export function notesModule(database: SQLDatabase): Module {
  return {
    name: "notes",
    register(router) {
      const notes = createSQLRepository<Note>(database, { table: "notes", columns: { id: "text", text: "text" } });
      router.route(
        post("/notes", { body: NewNote, responses: { 201: Note } }, async (ctx) =>
          created(await notes.create(ctx.event.req.signal, { id: crypto.randomUUID(), text: ctx.body.text }))),
      );
      // `?page=&limit=` (defaults 1 and 20, at most 100) and the Page envelope, documented in one word each.
      router.route(get("/notes", { query: pageQuery, responses: { 200: pageOf(Note) } }, (ctx) => notes.findAll(ctx.event.req.signal, ctx.query)));
      router.route(
        get("/notes/:id", { params: NoteId, responses: { 200: Note, 404: { description: "No note with this id" } } }, async (ctx) => {
          const note = await notes.findById(ctx.event.req.signal, ctx.params.id);
          if (!note) throw notFound(`no note with id ${ctx.params.id}`);
          return note;
        }),
      );
    },
  };
}
