import { z } from "zod";
import { InMemoryRepository, created, get, notFound, pageOf, pageQuery, post, type Module } from "keelson";

const Note = z.object({ id: z.string(), text: z.string() }).meta({ id: "Note" });
type Note = z.infer<typeof Note>;
const NewNote = z.object({ text: z.string().min(1).max(500) }).meta({ id: "NewNote" });
const NoteId = z.object({ id: z.string().min(1).max(64) });

/** Notes kept in memory: swap the repository for a database one when the service grows up. */
export const notesModule: Module = {
  name: "notes",
  register(router) {
    const notes = new InMemoryRepository<Note>((note) => note.id);
    router.route(
      post("/notes", { body: NewNote, responses: { 201: Note } }, async (ctx) =>
        created(await notes.create(undefined, { id: crypto.randomUUID(), text: ctx.body.text }))),
    );
    // `?page=&limit=` (defaults 1 and 20, at most 100) and the Page envelope, documented in one word each.
    router.route(get("/notes", { query: pageQuery, responses: { 200: pageOf(Note) } }, (ctx) => notes.findAll(undefined, ctx.query)));
    router.route(
      get("/notes/:id", { params: NoteId, responses: { 200: Note, 404: { description: "No note with this id" } } }, async (ctx) => {
        const note = await notes.findById(undefined, ctx.params.id);
        if (!note) throw notFound(`no note with id ${ctx.params.id}`);
        return note;
      }),
    );
    // GET /health runs every checker: a store that stops answering turns the service DOWN (503).
    router.app.registerHealthChecker({
      name: "notes",
      check: async (signal) => {
        await notes.count(signal);
      },
    });
  },
};
