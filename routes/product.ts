// The product API surface (SPEC.md §4 "Product API"). Placeholder until issue 3 lands.
import type { Config } from '../config.ts'
import type { Deps } from './deps.ts'
import { REASON } from './http.ts'
import type { Surface } from './surface.ts'

export function createProductSurface(_config: Config, _deps: Deps): Surface {
  return {
    name: 'product',
    routes: [],
    errorBody: (status, error) => ({ status: REASON[status] ?? 'Error', error: error.message }),
    headers: { 'Cache-Control': 'no-store' },
  }
}
