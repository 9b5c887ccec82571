//! A map for the RDM data path: the entries in a dense vector, a hash index
//! beside it, and a hint — the slot of the last key found — tried first.
//!
//! An endpoint's hot lookups (the peer of a send, the connection of a
//! completion, the credit share of a peer) ask for the same key many times in
//! a row: a ping-pong, a stream to one peer, an endpoint talking to itself.
//! With the hint, such a lookup is one key compare instead of hashing a
//! `SocketAddr` and probing a table (profiles of the message path had the
//! hash maps at about 400 instructions per message). A miss costs one compare
//! more than a plain `FxHashMap`, then the hash lookup, and moves the hint.
//!
//! Removal swaps the last entry into the freed slot (its index entry is
//! rewritten), so iteration order is arbitrary, as a hash map's is. The hint
//! is only a guess: it is checked against the key on every use, so a stale
//! hint finds the right entry or falls back to the index, never a wrong one.
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::hash::Hash;

/// A key of a [`HintMap`]: `hint_eq` is the compare of the hint, inlined
/// on every lookup (std's `SocketAddr` compare is an out-of-line call).
pub trait HintKey: Eq + Hash + Copy {
    fn hint_eq(&self, o: &Self) -> bool;
}

macro_rules! int_keys {
    ($($t:ty),*) => {$(
        impl HintKey for $t {
            #[inline(always)]
            fn hint_eq(&self, o: &Self) -> bool {
                self == o
            }
        }
    )*};
}
int_keys!(u8, u16, u32, u64);

impl HintKey for std::net::SocketAddr {
    /// IPv4 (the common case) compared inline, field by field; IPv6 by std.
    #[inline(always)]
    fn hint_eq(&self, o: &Self) -> bool {
        match (self, o) {
            (std::net::SocketAddr::V4(a), std::net::SocketAddr::V4(b)) => a.port() == b.port() && a.ip().octets() == b.ip().octets(),
            _ => self == o,
        }
    }
}

pub struct HintMap<K, V> {
    index: FxHashMap<K, usize>,
    slots: Vec<(K, V)>,
    hint: Cell<usize>,
}

impl<K, V> Default for HintMap<K, V> {
    fn default() -> Self {
        HintMap { index: FxHashMap::default(), slots: Vec::new(), hint: Cell::new(0) }
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for HintMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.slots.iter().map(|(k, v)| (k, v))).finish()
    }
}

impl<K: HintKey, V> HintMap<K, V> {
    /// The slot of `k`, the hint first (inlined: one compare on a hit).
    #[inline(always)]
    fn slot(&self, k: &K) -> Option<usize> {
        let h = self.hint.get();
        if let Some((kk, _)) = self.slots.get(h) {
            if kk.hint_eq(k) {
                return Some(h);
            }
        }
        self.slot_miss(k)
    }

    /// The hint missed: the hash index, and the hint moves there.
    #[inline(never)]
    fn slot_miss(&self, k: &K) -> Option<usize> {
        let i = *self.index.get(k)?;
        self.hint.set(i);
        Some(i)
    }

    #[inline(always)]
    pub fn get(&self, k: &K) -> Option<&V> {
        let i = self.slot(k)?;
        Some(&self.slots[i].1)
    }

    #[inline(always)]
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let i = self.slot(k)?;
        Some(&mut self.slots[i].1)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.slot(k).is_some()
    }

    /// Adds an entry for a key that has none; returns its slot (the hint).
    fn push(&mut self, k: K, v: V) -> usize {
        let i = self.slots.len();
        self.slots.push((k, v));
        self.index.insert(k, i);
        self.hint.set(i);
        i
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.slot(&k) {
            Some(i) => Some(std::mem::replace(&mut self.slots[i].1, v)),
            None => {
                self.push(k, v);
                None
            }
        }
    }

    /// The value of `k`, inserted with `f` if absent.
    pub fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let i = match self.slot(&k) {
            Some(i) => i,
            None => self.push(k, f()),
        };
        &mut self.slots[i].1
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let i = self.index.remove(k)?;
        let (_, v) = self.slots.swap_remove(i);
        if let Some((moved, _)) = self.slots.get(i) {
            // The last entry now lives in the freed slot.
            *self.index.get_mut(moved).expect("every slot is indexed") = i;
        }
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.slots.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots.iter_mut().map(|(_, v)| v)
    }

    /// The value in slot `i` (`0..len()`, in no particular order, which a
    /// removal changes): for walks that visit a few entries at a time.
    pub fn at_mut(&mut self, i: usize) -> Option<&mut V> {
        self.slots.get_mut(i).map(|(_, v)| v)
    }
}

impl<K: HintKey, V> std::ops::Index<&K> for HintMap<K, V> {
    type Output = V;
    fn index(&self, k: &K) -> &V {
        self.get(k).expect("no entry for the key")
    }
}

/// Equal: the same keys with equal values (slot order does not matter).
impl<K: HintKey, V: PartialEq> PartialEq for HintMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::tests::Rng;
    use super::*;
    use std::collections::HashMap;

    /// Random operations on a HintMap and a HashMap: they never differ.
    #[test]
    fn behaves_as_a_hash_map() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut h: HintMap<u32, u64> = HintMap::default();
        let mut m: HashMap<u32, u64> = HashMap::new();
        for step in 0..200_000u64 {
            // Few keys, so hits, misses, removals and reuse all happen often.
            let k = (rng.next() % 24) as u32;
            match rng.next() % 8 {
                0 | 1 => assert_eq!(h.insert(k, step), m.insert(k, step), "insert {k}"),
                2 => assert_eq!(h.remove(&k), m.remove(&k), "remove {k}"),
                3 => {
                    if let (Some(a), Some(b)) = (h.get_mut(&k), m.get_mut(&k)) {
                        *a += 1;
                        *b += 1;
                    }
                }
                4 => {
                    let a = *h.get_or_insert_with(k, || step);
                    let b = *m.entry(k).or_insert_with(|| step);
                    assert_eq!(a, b, "get_or_insert_with {k}");
                }
                _ => assert_eq!(h.get(&k), m.get(&k), "get {k}"),
            }
            assert_eq!(h.len(), m.len());
            assert_eq!(h.contains_key(&k), m.contains_key(&k));
        }
        let mut a: Vec<_> = h.iter().map(|(k, v)| (*k, *v)).collect();
        let mut b: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        for (k, _) in &b {
            assert!(h.remove(k).is_some());
        }
        assert!(h.is_empty() && h.get(&b[0].0).is_none());
    }

    /// The inline compare of socket addresses agrees with std's.
    #[test]
    fn socket_addr_hint_eq_agrees_with_eq() {
        use std::net::SocketAddr;
        let addrs: Vec<SocketAddr> = [
            "10.99.0.1:7000",
            "10.99.0.1:7001",
            "10.99.0.2:7000",
            "1.99.0.10:7000",
            "0.0.0.0:0",
            "[::1]:7000",
            "[::1]:7001",
            "[fe80::1%2]:7000",
            "[::ffff:10.99.0.1]:7000",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        for a in &addrs {
            for b in &addrs {
                assert_eq!(a.hint_eq(b), a == b, "{a} vs {b}");
            }
        }
        let mut h: HintMap<SocketAddr, usize> = HintMap::default();
        for (i, a) in addrs.iter().enumerate() {
            h.insert(*a, i);
        }
        for (i, a) in addrs.iter().enumerate().rev() {
            assert_eq!(h.get(a), Some(&i), "{a}");
        }
    }

    /// A hint left on a slot that now holds another key (after a removal
    /// moved the last entry into it) finds the right entry, not that one.
    #[test]
    fn stale_hint_finds_the_right_entry() {
        let mut h: HintMap<u32, &str> = HintMap::default();
        h.insert(1, "one");
        h.insert(2, "two");
        h.insert(3, "three");
        assert_eq!(h.get(&1), Some(&"one")); // hint: slot 0
        assert_eq!(h.remove(&1), Some("one")); // 3 moves into slot 0
        assert_eq!(h.get(&1), None);
        assert_eq!(h.get(&3), Some(&"three"));
        assert_eq!(h.get(&2), Some(&"two"));
        h.remove(&3);
        h.remove(&2);
        assert_eq!(h.get(&2), None); // the hint points past the end
        h.insert(4, "four");
        assert_eq!(h.get(&4), Some(&"four"));
    }
}
