/**
 * `toNodeListener`: runs a fetch-standard handler under `node:http` (`http.createServer(listener)`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
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
export function toNodeListener(handler: FetchHandler): (req: IncomingMessage, res: ServerResponse) => void {
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
        const request = new Request(url, {
          method: req.method ?? 'GET',
          headers,
          ...(hasBody ? { body: Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
        } as RequestInit);
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
