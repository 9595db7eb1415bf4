// A virtualized list of rows of varying height, the technique of react-window's
// VariableSizeList: only the rows in and near the viewport are in the DOM, between
// two spacers that stand for the rest. Heights start as estimates and are replaced
// by measurements (a ResizeObserver), so a row that grows (a reply streaming) moves
// nothing but itself and the spacers. The browser's scroll anchoring keeps the view
// still when rows above it turn out taller or shorter than estimated.

const OVERSCAN_PX = 600;

export class VirtualList {
  /**
   * @param {HTMLElement} scroller the scrolling element
   * @param {{render: (i: number) => HTMLElement, estimate: (i: number) => number}} rows
   */
  constructor(scroller, { render, estimate }) {
    this.scroller = scroller;
    this.render = render;
    this.estimate = estimate;
    this.top = document.createElement("div");
    this.body = document.createElement("div");
    this.bottom = document.createElement("div");
    this.top.className = this.bottom.className = "spacer";
    this.body.className = "rows";
    scroller.replaceChildren(this.top, this.body, this.bottom);
    this.heights = [];
    this.offsets = [0];
    this.dirty = true;
    this.rendered = new Map(); // index -> element
    this.frame = 0;
    this.onUpdate = null; // called after each update (auto-scroll hooks here)
    this.resizes = new ResizeObserver((entries) => {
      for (const entry of entries) {
        const i = Number(entry.target.dataset.index);
        const h = entry.borderBoxSize[0].blockSize;
        if (this.rendered.get(i) === entry.target && h && h !== this.heights[i]) {
          this.heights[i] = h;
          this.dirty = true;
        }
      }
      if (this.dirty) this.schedule();
    });
    scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
  }

  /** Replaces every row: `count` rows, none measured yet. */
  reset(count) {
    for (const node of this.rendered.values()) this.resizes.unobserve(node);
    this.rendered.clear();
    this.body.replaceChildren();
    this.heights = Array.from({ length: count }, (_, i) => this.estimate(i));
    this.dirty = true;
    this.update();
  }

  /** Rows from `from` on were added or replaced (a message sent, a reply regenerated). */
  splice(from, count) {
    for (const [i, node] of this.rendered) {
      if (i >= from) {
        this.resizes.unobserve(node);
        node.remove();
        this.rendered.delete(i);
      }
    }
    this.heights.length = from;
    for (let i = from; i < count; i++) this.heights.push(this.estimate(i));
    this.dirty = true;
    this.update();
  }

  /** The element of row `i` when it is in the DOM. */
  element(i) {
    return this.rendered.get(i) || null;
  }

  get count() {
    return this.heights.length;
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.update());
  }

  scrollToEnd() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  atEnd(slack = 48) {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight <= slack;
  }

  update() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (this.dirty) this.measure();
    const n = this.count;
    const view = this.scroller.scrollTop;
    const start = Math.max(0, this.indexAt(view - OVERSCAN_PX));
    const end = Math.min(n, this.indexAt(view + this.scroller.clientHeight + OVERSCAN_PX) + 1);
    for (const [i, node] of this.rendered) {
      if (i < start || i >= end) {
        this.resizes.unobserve(node);
        node.remove();
        this.rendered.delete(i);
      }
    }
    let anchor = null;
    for (let i = end - 1; i >= start; i--) {
      let node = this.rendered.get(i);
      if (!node) {
        node = this.render(i);
        node.dataset.index = String(i);
        this.body.insertBefore(node, anchor);
        this.rendered.set(i, node);
        this.resizes.observe(node);
      }
      anchor = node;
    }
    setHeight(this.top, this.offsets[start]);
    setHeight(this.bottom, this.offsets[n] - this.offsets[end]);
    if (this.onUpdate) this.onUpdate();
  }

  measure() {
    const n = this.count;
    const offsets = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + this.heights[i];
    this.offsets = offsets;
    this.dirty = false;
  }

  /** The row at `y` px from the top (binary search over the offsets). */
  indexAt(y) {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.offsets[mid + 1] <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

function setHeight(node, px) {
  // Written only when it changes: a streaming row must not touch the rest of the list.
  const value = `${Math.round(px)}px`;
  if (node.style.height !== value) node.style.height = value;
}
