/**
 * `laurel/otel`: OpenTelemetry spans for every engine call, built on the engine's `onCall` hook. Needs the
 * optional peer dependency `@opentelemetry/api` (any 1.x); spans go to whatever SDK the application set up.
 *
 * @example
 * ```ts
 * import { createEngine } from 'laurel';
 * import { otelHooks } from 'laurel/otel';
 *
 * const engine = createEngine({ config, store, hooks: otelHooks() });
 * ```
 *
 * @module laurel/otel
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import { isLaurelError } from './errors.js';
import type { CallInfo, EngineHooks } from './engine/observe.js';

/** Options of {@link otelHooks}. */
export interface OtelHooksOptions {
  /** The tracer to start spans with (default: `trace.getTracer('laurel')` of the global provider). */
  tracer?: Tracer;
  /** Record `laurel.user_id` on spans (default true); false where user ids must stay out of traces. */
  userId?: boolean;
}

const isThenable = (value: unknown): value is PromiseLike<unknown> => (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as PromiseLike<unknown>).then === 'function';

/**
 * Engine hooks that span each public call: span `laurel.<method>` (kind internal) with attributes
 * `laurel.operation`, `laurel.user_id` and `laurel.metric_key` where the call names them, and when it ends
 * `laurel.commits`, `laurel.retries` and `laurel.conflicts`. A failed call sets the span's status to error,
 * records the exception, and sets `error.type` (the Laurel error code, or the error's class name). The span
 * is the active one while the call runs, so store spans (e.g. of `pg` instrumentation) are its children,
 * and each retry and conflict is an event on it (`laurel.retry`, `laurel.conflict`) when a context manager
 * is registered. Combine with other hooks in a list: `hooks: [otelHooks(), myHooks]`.
 */
export function otelHooks(options: OtelHooksOptions | Tracer = {}): EngineHooks {
  const opts: OtelHooksOptions = typeof (options as Tracer | undefined)?.startSpan === 'function' ? { tracer: options as Tracer } : ((options ?? {}) as OtelHooksOptions);
  const tracer = opts.tracer ?? trace.getTracer('laurel');
  const withUser = opts.userId !== false;

  const ended = (span: Span, info: CallInfo) => {
    span.setAttributes({ 'laurel.commits': info.commits, 'laurel.retries': info.retries, 'laurel.conflicts': info.conflicts });
    span.end();
  };
  const failed = (span: Span, error: unknown) => {
    const type = isLaurelError(error) ? error.code : error instanceof Error ? error.name : typeof error;
    span.setAttribute('error.type', type);
    if (error instanceof Error) span.recordException(error);
    else span.recordException(String(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  };

  return {
    onCall(info, run) {
      const attributes: Attributes = { 'laurel.operation': info.operation };
      if (withUser && info.userId !== undefined) attributes['laurel.user_id'] = info.userId;
      if (info.metricKey !== undefined) attributes['laurel.metric_key'] = info.metricKey;
      const span = tracer.startSpan(`laurel.${info.operation}`, { kind: SpanKind.INTERNAL, attributes });
      let out: unknown;
      try {
        out = context.with(trace.setSpan(context.active(), span), run);
      } catch (error) {
        failed(span, error);
        ended(span, info);
        return undefined;
      }
      if (!isThenable(out)) {
        ended(span, info);
        return undefined;
      }
      return out.then(
        () => ended(span, info),
        (error: unknown) => {
          failed(span, error);
          ended(span, info);
        },
      );
    },
    onRetry(info) {
      trace.getSpan(context.active())?.addEvent('laurel.retry', { 'laurel.attempt': info.attempt, 'laurel.delay_ms': info.delayMs });
    },
    onConflict(info) {
      trace.getSpan(context.active())?.addEvent('laurel.conflict', { 'laurel.attempt': info.attempt, ...(withUser ? { 'laurel.user_id': info.userId } : {}) });
    },
  };
}

export type { CallErrorInfo, CallInfo, CallMessage, ConflictInfo, DegradedInfo, EngineHooks, RetryInfo } from './engine/observe.js';
