/**
 * An order-statistic treap: a balanced binary search tree with subtree sizes, giving O(log n) expected
 * insert, delete, rank, select-by-position and count-by-value. Used by the memory store for leaderboard
 * runs, so that no write sorts and no read scans.
 *
 * Order: higher value first, then earlier `reachedAt`, then smaller `userId`.
 */

export interface IndexEntry {
  userId: string;
  value: number;
  reachedAt: string;
}

interface Node {
  entry: IndexEntry;
  priority: number;
  size: number;
  left: Node | null;
  right: Node | null;
}

/** Negative when `a` ranks before `b`. */
export function compareEntries(a: IndexEntry, b: IndexEntry): number {
  if (a.value !== b.value) return a.value > b.value ? -1 : 1;
  if (a.reachedAt !== b.reachedAt) return a.reachedAt < b.reachedAt ? -1 : 1;
  return a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0;
}

const size = (n: Node | null) => (n ? n.size : 0);
const update = (n: Node) => {
  n.size = 1 + size(n.left) + size(n.right);
};

export class OrderedIndex {
  private root: Node | null = null;
  // xorshift32: priorities only shape the tree, so a fixed seed keeps runs reproducible.
  private seed = 0x2545f491;

  get size(): number {
    return size(this.root);
  }

  private random(): number {
    let x = this.seed;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.seed = x >>> 0;
    return this.seed;
  }

  /** Splits into (< key) and (>= key). */
  private split(n: Node | null, key: IndexEntry): [Node | null, Node | null] {
    if (!n) return [null, null];
    if (compareEntries(n.entry, key) < 0) {
      const [l, r] = this.split(n.right, key);
      n.right = l;
      update(n);
      return [n, r];
    }
    const [l, r] = this.split(n.left, key);
    n.left = r;
    update(n);
    return [l, n];
  }

  private merge(a: Node | null, b: Node | null): Node | null {
    if (!a) return b;
    if (!b) return a;
    if (a.priority > b.priority) {
      a.right = this.merge(a.right, b);
      update(a);
      return a;
    }
    b.left = this.merge(a, b.left);
    update(b);
    return b;
  }

  insert(entry: IndexEntry): void {
    const node: Node = { entry, priority: this.random(), size: 1, left: null, right: null };
    // Descend while the existing nodes have higher priority, then split the subtree under the new node.
    let parent: Node | null = null;
    let goLeft = false;
    let cur = this.root;
    const path: Node[] = [];
    while (cur && cur.priority > node.priority) {
      path.push(cur);
      parent = cur;
      goLeft = compareEntries(entry, cur.entry) < 0;
      cur = goLeft ? cur.left : cur.right;
    }
    const [l, r] = this.split(cur, entry);
    node.left = l;
    node.right = r;
    update(node);
    if (!parent) this.root = node;
    else if (goLeft) parent.left = node;
    else parent.right = node;
    for (const p of path) p.size += 1;
  }

  /** Removes the entry equal to `entry` (same value, reachedAt and userId). Returns false if absent. */
  remove(entry: IndexEntry): boolean {
    let parent: Node | null = null;
    let cur = this.root;
    const path: Node[] = [];
    while (cur) {
      const c = compareEntries(entry, cur.entry);
      if (c === 0) break;
      path.push(cur);
      parent = cur;
      cur = c < 0 ? cur.left : cur.right;
    }
    if (!cur) return false;
    const merged = this.merge(cur.left, cur.right);
    if (!parent) this.root = merged;
    else if (parent.left === cur) parent.left = merged;
    else parent.right = merged;
    for (const p of path) p.size -= 1;
    return true;
  }

  /** 1-based rank of an entry that is in the index. */
  rank(entry: IndexEntry): number {
    let rank = 0;
    let cur = this.root;
    while (cur) {
      const c = compareEntries(entry, cur.entry);
      if (c < 0) cur = cur.left;
      else {
        rank += size(cur.left) + 1;
        if (c === 0) return rank;
        cur = cur.right;
      }
    }
    return rank + 1;
  }

  /** The entry at 0-based position `i`, or undefined. */
  at(i: number): IndexEntry | undefined {
    let cur = this.root;
    while (cur) {
      const ls = size(cur.left);
      if (i < ls) cur = cur.left;
      else if (i === ls) return cur.entry;
      else {
        i -= ls + 1;
        cur = cur.right;
      }
    }
    return undefined;
  }

  /** Up to `limit` entries from 0-based position `offset`, in order: O(log n + limit). */
  range(offset: number, limit: number): IndexEntry[] {
    const out: IndexEntry[] = [];
    if (limit <= 0 || offset >= this.size) return out;
    // In-order walk that skips whole subtrees before `offset`.
    const stack: Node[] = [];
    let cur = this.root;
    let skip = offset;
    while (cur) {
      const ls = size(cur.left);
      if (skip < ls) {
        stack.push(cur);
        cur = cur.left;
      } else if (skip === ls) {
        stack.push(cur);
        cur = null;
      } else {
        skip -= ls + 1;
        cur = cur.right;
      }
    }
    while (stack.length > 0 && out.length < limit) {
      const n = stack.pop() as Node;
      out.push(n.entry);
      let c = n.right;
      while (c) {
        stack.push(c);
        c = c.left;
      }
    }
    return out;
  }

  /** Number of entries with `value >= v`. */
  countAtLeast(v: number): number {
    let count = 0;
    let cur = this.root;
    while (cur) {
      if (cur.entry.value >= v) {
        count += size(cur.left) + 1;
        cur = cur.right;
      } else cur = cur.left;
    }
    return count;
  }
}
