// Server-sent events over fetch: the streamed body is read as it arrives and cut into
// events at blank lines, as the SSE spec says. Each event's `data:` lines are joined
// with "\n"; comments (":") and other fields are ignored. EventSource cannot POST or
// send headers, hence this reader.

/** Yields the data of each event in `response`'s body until the body ends. */
export async function* readEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n|\r\r/)) !== -1) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^(\r?\n\r?\n|\r\r)/, "");
        const data = dataOf(block);
        if (data !== null) yield data;
      }
      if (done) {
        const data = dataOf(buffer);
        if (data !== null) yield data;
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function dataOf(block) {
  const lines = [];
  for (const line of block.split(/\r?\n|\r/)) {
    if (line.startsWith("data:")) lines.push(line.slice(line[5] === " " ? 6 : 5));
  }
  return lines.length ? lines.join("\n") : null;
}
