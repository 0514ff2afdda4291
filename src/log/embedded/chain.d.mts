// Types of chain.mjs (the log's hash chain).
export declare const LINK_BYTES: number;
export declare const ZERO_LINK: Buffer;
export declare function recordDigest(offset: number, bytes: Uint8Array, start: number, end: number): Buffer;
export declare function nextLink(prev: Uint8Array, digest: Uint8Array): Buffer;
export declare function chainSegment(prev: Uint8Array, packed: Uint8Array, firstOffset: number): Buffer;
export declare function lastLink(chain: Buffer | null | undefined): Buffer | undefined;
