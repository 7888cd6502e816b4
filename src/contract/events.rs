//! `recentEvents`: the newest events a snapshot shows at its detail level, each serialized
//! as `{seq, at, type, ...data}` straight from the stored row (its data members borrowed, not
//! parsed into a tree).

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::detail::{
    Detail, SUMMARY_EVENTS, SUMMARY_EVENT_TEXT_CHARS, TAIL_EVENTS, TAIL_EVENT_TEXT_CHARS,
};
use crate::store::events::EventRow;
use crate::text::compact_cut;

/// A `tool_started` event's member that only the row keeps (the call's arguments, see
/// `runtime::mapping::TOOL_ARGS_CHARS`): pi-threads' events have no such member, so a snapshot
/// leaves it out.
const ROW_ONLY: &str = "args";

/// `recentEvents`: the last events the detail level shows.
#[derive(Debug, Clone, Copy)]
pub struct RecentEvents<'a> {
    events: &'a [EventRow],
    detail: Detail,
}

impl<'a> RecentEvents<'a> {
    pub fn new(events: &'a [EventRow], detail: Detail) -> Self {
        RecentEvents { events, detail }
    }

    /// The events shown, oldest first, each with its data as the snapshot shows it
    /// (`assistant_message.text` shortened as the detail level says).
    pub fn shown(&self) -> impl Iterator<Item = (&'a EventRow, Value)> + '_ {
        let keep = usize::try_from(recent_event_count(self.detail)).unwrap_or(usize::MAX);
        let shown = &self.events[self.events.len().saturating_sub(keep)..];
        let detail = self.detail;
        shown.iter().map(move |e| {
            let mut data: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
            if let Some(m) = data.as_object_mut().filter(|_| e.kind == "tool_started") {
                m.remove(ROW_ONLY);
            }
            if e.kind == "assistant_message" && detail != Detail::Full {
                if let Some(text) = data.get("text").and_then(Value::as_str) {
                    let limit = match detail {
                        Detail::Summary => SUMMARY_EVENT_TEXT_CHARS,
                        _ => TAIL_EVENT_TEXT_CHARS,
                    };
                    data["text"] = Value::String(compact_cut(text, limit));
                }
            }
            (e, data)
        })
    }
}

/// How many of the newest events `detail` shows (all of them at `full`).
pub fn recent_event_count(detail: Detail) -> i64 {
    match detail {
        Detail::Summary => SUMMARY_EVENTS as i64,
        Detail::Tail => TAIL_EVENTS as i64,
        Detail::Full => i64::MAX,
    }
}

impl Serialize for RecentEvents<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let keep = usize::try_from(recent_event_count(self.detail)).unwrap_or(usize::MAX);
        let shown = &self.events[self.events.len().saturating_sub(keep)..];
        let mut seq = s.serialize_seq(Some(shown.len()))?;
        for e in shown {
            seq.serialize_element(&EventView {
                event: e,
                detail: self.detail,
            })?;
        }
        seq.end()
    }
}

/// One event: `{seq, at, type, ...data}`.
struct EventView<'a> {
    event: &'a EventRow,
    detail: Detail,
}

impl Serialize for EventView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.event;
        let data = match e.data.as_str() {
            "{}" => DataMembers::default(),
            text => serde_json::from_str::<DataMembers<'_>>(text).unwrap_or_default(),
        };
        let mut m = s.serialize_map(Some(3 + data.0.len()))?;
        m.serialize_entry("seq", &e.seq)?;
        m.serialize_entry("at", &e.at)?;
        m.serialize_entry("type", &e.kind)?;
        let shortens = e.kind == "assistant_message" && self.detail != Detail::Full;
        for (k, v) in &data.0 {
            if matches!(k.as_ref(), "seq" | "at" | "type")
                || (e.kind == "tool_started" && k == ROW_ONLY)
            {
                continue;
            }
            match (shortens && k == "text")
                .then(|| serde_json::from_str::<Borrowed<'_>>(v.get()).ok())
                .flatten()
            {
                Some(Borrowed(text)) => {
                    // Compacted, then cut (summary 180, tail 700).
                    let short = match self.detail {
                        Detail::Summary => compact_cut(&text, SUMMARY_EVENT_TEXT_CHARS),
                        _ => compact_cut(&text, TAIL_EVENT_TEXT_CHARS),
                    };
                    m.serialize_entry(k.as_ref(), &short)?;
                }
                None => m.serialize_entry(k.as_ref(), v)?,
            }
        }
        m.end()
    }
}

/// The members of a stored event's `data` object, borrowed from its text (a later duplicate
/// key replaces the earlier value in place, as a JSON map would). Not an object: no members.
#[derive(Default)]
struct DataMembers<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for DataMembers<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = DataMembers<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::new();
                while let Some(Borrowed(k)) = map.next_key()? {
                    let v: &'de RawValue = map.next_value()?;
                    match members.iter_mut().find(|(old, _)| *old == k) {
                        Some(slot) => slot.1 = v,
                        None => members.push((k, v)),
                    }
                }
                Ok(DataMembers(members))
            }
        }
        d.deserialize_map(Members)
    }
}

/// A JSON string, borrowed when it has no escapes.
struct Borrowed<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct K;
        impl<'de> Visitor<'de> for K {
            type Value = Borrowed<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Owned(v)))
            }
        }
        d.deserialize_str(K)
    }
}
