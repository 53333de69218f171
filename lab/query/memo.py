"""memo: the one bounded cache of recent answers the query modules keep (funnels, histograms, codes,
texts, clusters): newest last, the oldest dropped past a count or a total weight, safe across threads.

>>> m = Memo(2)
>>> m.put("a", 1); m.put("b", 2); m.get("a"); m.put("c", 3)
1
>>> list(m.recent())  # newest first: "b" was the least recently used
[('c', 3), ('a', 1)]
>>> t = Memo(10, weigh=len); t.put(1, "abcdef"); t.put(2, "ghijkl"); 1 in t, 2 in t
(False, True)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator


class Memo:
    """At most ``limit`` entries (or, with ``weigh``, entries weighing ``limit`` in all), the least
    recently used dropped first. Reading an entry makes it the most recent."""

    def __init__(self, limit: int, weigh: Callable[[Any], int] | None = None):
        self.limit, self.weigh = limit, weigh
        self._items: OrderedDict = OrderedDict()
        self._weight = 0
        self._lock = threading.RLock()

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            if key in self._items and self.weigh is not None:
                self._weight -= self.weigh(self._items[key])
            self._items[key] = value
            self._items.move_to_end(key)
            if self.weigh is None:
                while len(self._items) > self.limit:
                    self._items.popitem(last=False)
            else:
                self._weight += self.weigh(value)
                while self._weight > self.limit and self._items:
                    self._weight -= self.weigh(self._items.popitem(last=False)[1])

    def recent(self) -> Iterator[tuple[Any, Any]]:
        """(key, value) pairs, newest first (a snapshot: safe to iterate while others write)."""
        with self._lock:
            items = list(self._items.items())
        return reversed(items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        return len(self._items)
