/**
 * Stable, UUID-shaped ids for configured entities. An entity without an explicit `id` gets one derived from
 * its kind and key, so the same configuration yields the same ids on every restart and in every process.
 * The hash is a 128-bit FNV-1a variant computed over the UTF-16 code units; it is not a security primitive,
 * only a spread-out, deterministic name for a (kind, key) pair.
 */
export function stableId(kind: string, key: string): string {
  const text = `laurel:${kind}:${key}`;
  // Four independent 32-bit FNV-1a lanes with different offsets give 128 bits.
  const lanes = [0x811c9dc5, 0x01000193 ^ 0x9e3779b9, 0x85ebca6b, 0xc2b2ae35];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    for (let l = 0; l < 4; l++) {
      let h = (lanes[l] as number) ^ (c + l * 0x3b);
      h = Math.imul(h, 0x01000193);
      h ^= h >>> 15;
      lanes[l] = h >>> 0;
    }
  }
  // Final avalanche mixes each lane with the others.
  for (let l = 0; l < 4; l++) {
    let h = (lanes[l] as number) ^ (lanes[(l + 1) % 4] as number);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    lanes[l] = (h ^ (h >>> 16)) >>> 0;
  }
  // The 32 hex digits with their dashes, made as one flat string (joined pieces would be a tree of strings,
  // several hundred bytes, that whatever keeps the id keeps whole: time grants' award ids are kept per row).
  const codes: number[] = new Array(36);
  let at = 0;
  for (let k = 0; k < 32; k++) {
    if (k === 8 || k === 12 || k === 16 || k === 20) codes[at++] = 45; // '-'
    let nibble = ((lanes[k >> 3] as number) >>> ((7 - (k & 7)) * 4)) & 15;
    // Version nibble 8 ("custom", RFC 9562) and the RFC variant bits, so it reads as a well-formed UUID.
    if (k === 12) nibble = 8;
    else if (k === 16) nibble = (nibble & 0x3) | 0x8;
    codes[at++] = nibble < 10 ? 48 + nibble : 87 + nibble;
  }
  return String.fromCharCode(...codes);
}
