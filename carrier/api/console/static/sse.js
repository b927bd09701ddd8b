// Server-sent events read from a fetch() body: EventSource cannot POST or send a bearer token.

/** Turns decoded text, fed in arbitrary pieces, into {event, data} records. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.event = "";
    this.data = [];
  }

  /** Feed more text; returns the events it completed. */
  feed(text) {
    this.buffer += text;
    const events = [];
    let newline;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buffer.slice(0, newline);
      const width = this.buffer.startsWith("\r\n", newline) ? 2 : 1;
      // A lone "\r" at the very end may be the first half of "\r\n": wait for more.
      if (width === 1 && this.buffer[newline] === "\r" && newline === this.buffer.length - 1) {
        break;
      }
      this.buffer = this.buffer.slice(newline + width);
      const done = this.line(line);
      if (done) events.push(done);
    }
    return events;
  }

  line(line) {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const out = { event: this.event || "message", data: this.data.join("\n") };
      this.event = "";
      this.data = [];
      return out;
    }
    if (line.startsWith(":")) return null; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    return null;
  }
}

/** Yields the events of a streaming response body as they arrive. */
export async function* readEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* parser.feed(decoder.decode(value, { stream: true }));
    }
    yield* parser.feed(decoder.decode() + "\n\n");
  } finally {
    reader.releaseLock();
  }
}
