/**
 * Type tests (issue 17): `isLaurelErrorCode(e, code)` narrows to the class that code is thrown as, so the
 * subclass's fields are readable without a cast.
 */
import { describe, expectTypeOf, it } from 'vitest';
import {
  ConfigError,
  ConflictError,
  InsufficientPointsError,
  InvalidAttributeKeysError,
  isLaurelError,
  isLaurelErrorCode,
  LaurelError,
  NoLevelsError,
  NotFoundError,
  StorageUnavailableError,
  UnauthorizedError,
  ValidationError,
  type LaurelErrorByCode,
  type LaurelErrorCode,
  type NotFoundKind,
  type ValidationIssue,
} from '../src/index.js';

declare const e: unknown;

describe('isLaurelErrorCode narrows to the subclass', () => {
  it('INSUFFICIENT_POINTS keeps total and required', () => {
    if (isLaurelErrorCode(e, 'INSUFFICIENT_POINTS')) {
      expectTypeOf(e).toEqualTypeOf<InsufficientPointsError>();
      expectTypeOf(e.total).toEqualTypeOf<number>();
      expectTypeOf(e.required).toEqualTypeOf<number>();
      expectTypeOf(e.pointsSystemKey).toEqualTypeOf<string>();
      expectTypeOf(e.code).toEqualTypeOf<'INSUFFICIENT_POINTS'>();
    }
  });

  it('every other code has its own class and fields', () => {
    if (isLaurelErrorCode(e, 'VALIDATION')) expectTypeOf(e.issues).toEqualTypeOf<ValidationIssue[]>();
    if (isLaurelErrorCode(e, 'INVALID_ATTRIBUTE_KEYS')) expectTypeOf(e.keys).toEqualTypeOf<string[]>();
    if (isLaurelErrorCode(e, 'NOT_FOUND')) {
      expectTypeOf(e.kind).toEqualTypeOf<NotFoundKind>();
      expectTypeOf(e.key).toEqualTypeOf<string>();
    }
    if (isLaurelErrorCode(e, 'NO_LEVELS')) expectTypeOf(e.pointsSystemKey).toEqualTypeOf<string>();
    if (isLaurelErrorCode(e, 'CONFIG')) expectTypeOf(e.issues).toEqualTypeOf<ValidationIssue[]>();
    if (isLaurelErrorCode(e, 'STORAGE_UNAVAILABLE')) expectTypeOf(e.committed).toEqualTypeOf<false | 'unknown'>();
    if (isLaurelErrorCode(e, 'CONFLICT')) expectTypeOf(e).toEqualTypeOf<ConflictError>();
    if (isLaurelErrorCode(e, 'UNAUTHORIZED')) expectTypeOf(e).toEqualTypeOf<UnauthorizedError>();
  });

  it('does not give a code the fields of another', () => {
    if (isLaurelErrorCode(e, 'NO_LEVELS')) {
      // @ts-expect-error: a NoLevelsError has no `total`
      void e.total;
    }
    if (isLaurelErrorCode(e, 'CONFLICT')) {
      // @ts-expect-error: a ConflictError has no `issues`
      void e.issues;
    }
    // @ts-expect-error: not a code
    void isLaurelErrorCode(e, 'INSUFFICIENT_POINT');
  });

  it('narrows a union of codes to the union of their classes', () => {
    const code = Math.random() < 0.5 ? ('NOT_FOUND' as const) : ('NO_LEVELS' as const);
    if (isLaurelErrorCode(e, code)) {
      expectTypeOf(e).toEqualTypeOf<NotFoundError | NoLevelsError>();
      if (e.code === 'NOT_FOUND') expectTypeOf(e).toEqualTypeOf<NotFoundError>();
    }
  });

  it('maps every code to a class whose code is that code', () => {
    expectTypeOf<keyof LaurelErrorByCode>().toEqualTypeOf<LaurelErrorCode>();
    expectTypeOf<{ [C in LaurelErrorCode]: LaurelErrorByCode[C]['code'] }>().toEqualTypeOf<{ [C in LaurelErrorCode]: C }>();
    expectTypeOf<LaurelErrorByCode>().toEqualTypeOf<{
      VALIDATION: ValidationError;
      INVALID_ATTRIBUTE_KEYS: InvalidAttributeKeysError;
      NOT_FOUND: NotFoundError;
      CONFLICT: ConflictError;
      INSUFFICIENT_POINTS: InsufficientPointsError;
      NO_LEVELS: NoLevelsError;
      CONFIG: ConfigError;
      UNAUTHORIZED: UnauthorizedError;
      STORAGE_UNAVAILABLE: StorageUnavailableError;
    }>();
  });

  it('keeps isLaurelError narrowing to the base class', () => {
    if (isLaurelError(e)) {
      expectTypeOf(e).toEqualTypeOf<LaurelError>();
      expectTypeOf(e.code).toEqualTypeOf<LaurelErrorCode>();
    }
  });
});
