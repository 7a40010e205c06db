// The speed probe's child, pinned to the servers' CPU: for every line on stdin, about 100 ms of the
// same fixed work (objects, JSON, strings, a Map: what a JSON API's request does), answered with one
// line, the work units per CPU millisecond. A machine that slows down for seconds at a time (another
// guest on the host) shows here, with no server involved.
const BOOK = { id: "42", title: "Book 42", author: "Anonymous", tags: ["a", "b"], n: 0 };

function unit(): number {
  let length = 0;
  const kept = new Map<string, unknown>();
  for (let i = 0; i < 200; i++) {
    const text = JSON.stringify({ ...BOOK, n: i });
    const parsed = JSON.parse(text) as typeof BOOK;
    kept.set(parsed.title + i, parsed);
    length += text.length;
  }
  return length + kept.size;
}

let sink = 0;
function measure(): number {
  const before = process.cpuUsage();
  const started = performance.now();
  let units = 0;
  while (performance.now() - started < 100) {
    sink += unit();
    units++;
  }
  const spent = process.cpuUsage(before);
  return units / ((spent.user + spent.system) / 1_000);
}

// Compiled before the first answer, so the first reading is not the compiler's.
measure();
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  for (const char of chunk) if (char === "\n") process.stdout.write(`${measure().toFixed(3)}\n`);
});
process.stdin.on("end", () => process.exit(sink === -1 ? 1 : 0));
process.stdout.write("READY\n");
