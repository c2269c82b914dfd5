//! The one way the rate discipline locks its state.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex whose data stays consistent at every point a panic could occur, so a poisoned
/// lock is still usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
