// The discovery surface (SPEC.md §5.6). Placeholder until issue 4 lands.
import type { Config } from '../config.ts'
import type { Surface } from './surface.ts'

export function createDiscoverySurface(_config: Config): Surface {
  return { name: 'discovery', routes: [], errorBody: (_status, error) => ({ error: error.message }) }
}
