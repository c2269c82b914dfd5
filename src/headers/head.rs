//! The fields of a response head that the client reads, found in one pass over its headers.

use http::{HeaderMap, HeaderValue};

/// A response head's fields that the client reads. A lookup by name hashes the name and
/// probes the map; every response is read for up to nine names, most of them absent, and one
/// pass over the few headers it has costs less than that.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head<'h> {
    map: &'h HeaderMap,
    pub(crate) date: Field<'h>,
    pub(crate) retry_after: Field<'h>,
    pub(crate) limit: Field<'h>,
    pub(crate) remaining: Field<'h>,
    pub(crate) reset: Field<'h>,
    /// Whether any IETF quota field that starts a quota is there: `RateLimit`,
    /// `RateLimit-Limit` or `RateLimit-Remaining`.
    pub(crate) ietf: bool,
    pub(crate) deprecation: Field<'h>,
    pub(crate) sunset: Field<'h>,
}

/// One field of a head: its first line, and whether it has more.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Field<'h> {
    first: Option<&'h HeaderValue>,
    repeated: bool,
}

impl<'h> Head<'h> {
    pub(crate) fn of(map: &'h HeaderMap) -> Self {
        let mut head = Self {
            map,
            date: Field::default(),
            retry_after: Field::default(),
            limit: Field::default(),
            remaining: Field::default(),
            reset: Field::default(),
            ietf: false,
            deprecation: Field::default(),
            sunset: Field::default(),
        };
        for (name, value) in map {
            let field = match name.as_str() {
                "date" => &mut head.date,
                "retry-after" => &mut head.retry_after,
                "x-ratelimit-limit" => &mut head.limit,
                "x-ratelimit-remaining" => &mut head.remaining,
                "x-ratelimit-reset" => &mut head.reset,
                "ratelimit" | "ratelimit-limit" | "ratelimit-remaining" => {
                    head.ietf = true;
                    continue;
                }
                "deprecation" => &mut head.deprecation,
                "sunset" => &mut head.sunset,
                _ => continue,
            };
            field.see(value);
        }
        head
    }

    /// All the headers, for the fields read rarely.
    pub(crate) fn map(&self) -> &'h HeaderMap {
        self.map
    }
}

impl<'h> Field<'h> {
    fn see(&mut self, value: &'h HeaderValue) {
        if self.first.is_some() {
            self.repeated = true;
        } else {
            self.first = Some(value);
        }
    }

    /// The first line, as [`HeaderMap::get`] gives it.
    pub(crate) fn first(self) -> Option<&'h HeaderValue> {
        self.first
    }

    /// The line of a field given once; `None` when it is absent or repeated.
    pub(crate) fn single(self) -> Option<&'h HeaderValue> {
        self.first.filter(|_| !self.repeated)
    }

    pub(crate) fn is_present(self) -> bool {
        self.first.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderName;
    use proptest::prelude::*;

    const NAMES: [&str; 14] = [
        "date",
        "retry-after",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        "ratelimit-policy",
        "deprecation",
        "sunset",
        "content-type",
        "X-RateLimit-Limit",
    ];

    proptest! {
        /// Each field is what a lookup by its name finds.
        #[test]
        fn a_head_reads_as_looking_up_each_name(
            lines in prop::collection::vec((0..NAMES.len(), 0..3_u8), 0..12)
        ) {
            let mut map = HeaderMap::new();
            for (name, value) in lines {
                let name = HeaderName::from_bytes(NAMES[name].as_bytes()).unwrap();
                map.append(name, HeaderValue::from(u16::from(value)));
            }
            let head = Head::of(&map);
            let fields = [
                ("date", head.date),
                ("retry-after", head.retry_after),
                ("x-ratelimit-limit", head.limit),
                ("x-ratelimit-remaining", head.remaining),
                ("x-ratelimit-reset", head.reset),
                ("deprecation", head.deprecation),
                ("sunset", head.sunset),
            ];
            for (name, field) in fields {
                prop_assert_eq!(field.first(), map.get(name), "{}", name);
                prop_assert_eq!(field.is_present(), map.contains_key(name), "{}", name);
                let all: Vec<_> = map.get_all(name).iter().collect();
                prop_assert_eq!(field.single(), (all.len() == 1).then(|| all[0]), "{}", name);
            }
            let ietf = ["ratelimit", "ratelimit-limit", "ratelimit-remaining"];
            prop_assert_eq!(head.ietf, ietf.iter().any(|name| map.contains_key(*name)));
        }
    }
}
