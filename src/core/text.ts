/** Text every store can keep. */

/**
 * True for text every store can keep exactly: well-formed UTF-16 (no lone surrogate, which UTF-8 databases
 * would turn into U+FFFD and so merge distinct strings) and no NUL character (PostgreSQL's text and jsonb
 * cannot hold it). Laurel refuses anything else up front, on every store alike.
 */
export function isStorableText(value: string): boolean {
  return !value.includes('\0') && (value as string & { isWellFormed(): boolean }).isWellFormed();
}
