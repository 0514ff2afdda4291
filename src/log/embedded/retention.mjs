// The embedded log's retention, a chunk at a time: the oldest rows of a stream (a topic partition)
// whose records are all past the cutoff, up to the first row that is not, never its newest row (end
// offsets survive a restart), so a partition always starts where its chain goes on. Plain JavaScript:
// the writer thread (sqlite-writer.worker.mjs) runs it between commits, on its own connection.

/** Rows one chunk deletes at most (one statement, one short transaction). */
export const RETAIN_CHUNK_ROWS = 1000;

/**
 * A chunk of retention on `db`, with the statements `sql` names (embedded-log.ts owns the schema):
 * `oldest` (@stream's rows from its start, first_offset and last_ts, at most @limit), `newest`
 * (@stream's newest first_offset) and `deleteBefore` (@stream's rows before offset @to).
 */
export function retentionChunk(db, sql) {
  const oldest = db.prepare(sql.oldest);
  const newest = db.prepare(sql.newest).pluck();
  const deleteBefore = db.prepare(sql.deleteBefore);
  /** Deletes up to RETAIN_CHUNK_ROWS expired rows at the start of `stream`: how many, and whether more may be. */
  return (stream, cutoff) => {
    const last = newest.get({ stream });
    const rows = oldest.all({ stream, limit: RETAIN_CHUNK_ROWS });
    let n = 0;
    while (n < rows.length && rows[n].last_ts < cutoff && rows[n].first_offset !== last) n++;
    if (n === 0) return { deleted: 0, more: false };
    const { changes } = deleteBefore.run({ stream, to: rows[n - 1].first_offset + 1 });
    return { deleted: changes, more: n === RETAIN_CHUNK_ROWS };
  };
}
