/**
 * `toNodeListener`: runs a fetch-standard handler under `node:http` (`http.createServer(listener)`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FetchHandler } from './handler.js';

/**
 * Adapts a `(Request) => Promise<Response>` handler to a `node:http` request listener.
 *
 * @example
 * ```ts
 * import http from 'node:http';
 * http.createServer(toNodeListener(createHttpHandler(engine, { apiKeys: ['secret'] }))).listen(3000);
 * ```
 */
export function toNodeListener(handler: FetchHandler, options: { maxBodyBytes?: number } = {}): (req: IncomingMessage, res: ServerResponse) => void {
  options = options ?? {};
  // Bodies are read into memory here (a web stream per request costs more than the whole event), up to
  // this cap; the handler applies its own, usually smaller, `maxBodyBytes` after that.
  const cap = options.maxBodyBytes ?? 1_048_576;
  // A body over the cap is answered 413 at once and the rest of it is read and dropped, never kept: closing
  // the socket while the client is still sending would make its TCP stack discard the 413 (a reset), so
  // the client could not read it. Node's own `requestTimeout` bounds how long a body may keep coming.
  const readBody = (req: IncomingMessage) =>
    new Promise<Buffer | null>((resolve, reject) => {
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > cap) {
        req.resume();
        resolve(null);
        return;
      }
      let chunks: Buffer[] = [];
      let size = 0;
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > cap) {
          chunks = [];
          req.removeListener('data', onData);
          req.resume();
          resolve(null);
          return;
        }
        chunks.push(chunk);
      };
      req.on('data', onData);
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
  return (req, res) => {
    void (async () => {
      try {
        const host = req.headers.host ?? 'localhost';
        const url = new URL(req.url ?? '/', `http://${/^[\w.:[\]-]+$/.test(host) ? host : 'localhost'}`);
        const headers = new Headers();
        for (const [name, value] of Object.entries(req.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) {
            try {
              headers.append(name, v);
            } catch {
              // A header value that the fetch standard refuses is dropped, never a crash.
            }
          }
        }
        const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
        const body = hasBody ? await readBody(req) : null;
        if (hasBody && body === null) {
          res.statusCode = 413;
          res.setHeader('content-type', 'application/json; charset=utf-8');
          res.end(JSON.stringify({ error: `Request body exceeds ${cap} bytes` }));
          return;
        }
        const request = new Request(url, { method: req.method ?? 'GET', headers, ...(body ? { body } : {}) });
        const response = await handler(request);
        res.statusCode = response.status;
        response.headers.forEach((value, name) => res.setHeader(name, value));
        res.end(Buffer.from(await response.arrayBuffer()));
      } catch {
        if (!res.headersSent) {
          res.statusCode = 400;
          res.setHeader('content-type', 'application/json; charset=utf-8');
        }
        res.end(JSON.stringify({ error: 'Bad request' }));
      }
    })();
  };
}
