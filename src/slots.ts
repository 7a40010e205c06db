/**
 * Values that come and go, one per connection or per request, each kept at a slot number until it
 * is released; a freed slot takes the next value. In place of a Set or a Map that lives as long as
 * the process: V8 keeps such a collection in its old generation, and with an entry added and
 * deleted for every value, its young-generation collections kept values long deleted alive and
 * moved them to the old generation (docs/architecture.md).
 */
export class Slots<T> {
  readonly #values: Array<T | undefined> = [];
  readonly #free: number[] = [];

  /** The slot the next `add()` fills. */
  get next(): number {
    return this.#free.at(-1) ?? this.#values.length;
  }

  /** Keeps `value`; returns its slot. */
  add(value: T): number {
    const slot = this.#free.pop() ?? this.#values.length;
    this.#values[slot] = value;
    return slot;
  }

  /** The value at `slot`; undefined when the slot is free. */
  get(slot: number): T | undefined {
    return this.#values[slot];
  }

  /** Frees `slot` if it still holds `value` (a slot released before may hold another value since); true if it did. */
  release(slot: number, value: T): boolean {
    if (this.#values[slot] !== value) return false;
    this.#values[slot] = undefined;
    this.#free.push(slot);
    return true;
  }

  /** Calls `visit` for every value kept, in slot order; `visit` may release the slot it is given. */
  forEach(visit: (value: T, slot: number) => void): void {
    const values = this.#values;
    for (let slot = 0; slot < values.length; slot++) {
      const value = values[slot];
      if (value !== undefined) visit(value, slot);
    }
  }

  /** Forgets every value. */
  clear(): void {
    this.#values.length = 0;
    this.#free.length = 0;
  }
}
