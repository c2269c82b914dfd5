//! Wall-clock time, anchored once to a tokio instant and then advanced by tokio's clock: waits
//! computed from a wall time are exact under a paused clock in tests and immune to wall-clock
//! jumps in production. Only the fallback for a response without `Date`, from which
//! [`server_time`] reads the service's clock.

mod local;
mod server_time;

pub(crate) use local::{Clock, after, after_from};
pub(crate) use server_time::{ServerClock, ServerTime};
