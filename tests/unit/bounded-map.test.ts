// The Map behind the request path's remembered answers (the rate-limit key): it
// never holds more than its limit, and a key it already holds is updated without emptying it.
import t from 'tap'
import { BoundedMap } from '../../http/bounded-map.ts'

t.test('holds at most its limit: one entry past it empties the map first', async (t) => {
  const map = new BoundedMap<string, number>(3)
  for (const [i, key] of ['a', 'b', 'c'].entries()) map.set(key, i)
  t.same([...map], [['a', 0], ['b', 1], ['c', 2]])
  map.set('d', 3)
  t.same([...map], [['d', 3]])
  for (let i = 0; i < 100; i++) map.set(`k${i}`, i)
  t.ok(map.size <= 3, `size ${map.size}`)
  t.equal(map.get('k99'), 99)
})

t.test('a key it holds is updated in place when full, the others kept', async (t) => {
  const map = new BoundedMap<string, number>(2)
  map.set('a', 1).set('b', 2).set('a', 10)
  t.same([...map], [['a', 10], ['b', 2]])
  t.equal(map.limit, 2)
})
