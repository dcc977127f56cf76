/** A binary min-heap ordered by a numeric key. Entries are removed lazily by their owners. */
export class MinHeap<T> {
  private readonly items: Array<{ key: number; value: T }> = [];

  get size(): number {
    return this.items.length;
  }

  push(key: number, value: T): void {
    const items = this.items;
    items.push({ key, value });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent].key <= key) break;
      items[i] = items[parent];
      i = parent;
    }
    items[i] = { key, value };
  }

  peekKey(): number | undefined {
    return this.items.length > 0 ? this.items[0].key : undefined;
  }

  pop(): T | undefined {
    const items = this.items;
    if (items.length === 0) return undefined;
    const top = items[0];
    const last = items.pop()!;
    if (items.length > 0) {
      let i = 0;
      const n = items.length;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let smallest = i;
        let smallestKey = last.key;
        if (l < n && items[l].key < smallestKey) {
          smallest = l;
          smallestKey = items[l].key;
        }
        if (r < n && items[r].key < smallestKey) smallest = r;
        if (smallest === i) break;
        items[i] = items[smallest];
        i = smallest;
      }
      items[i] = last;
    }
    return top.value;
  }

  clear(): void {
    this.items.length = 0;
  }
}
