// A Map for remembered answers on the request path that cannot be made to grow without bound.

/**
 * A Map that holds at most `limit` entries: adding one more empties it first. Clients send the
 * same few values (Host headers, addresses), so the memory fills once and stays; a flood of
 * made-up values empties it instead of growing it, and costs only the work the memory saves.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  readonly limit: number
  constructor(limit: number) {
    super()
    this.limit = limit
  }

  override set(key: K, value: V): this {
    if (this.size >= this.limit && !this.has(key)) this.clear()
    return super.set(key, value)
  }
}
