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
  // Bodies are read into memory here (a web stream per request costs more than the whole event), up to
  // this cap; the handler applies its own, usually smaller, `maxBodyBytes` after that.
  const cap = options.maxBodyBytes ?? 1_048_576;
  const readBody = (req: IncomingMessage) =>
    new Promise<Buffer | null>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > cap) {
          resolve(null);
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
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
          res.setHeader('connection', 'close');
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
