//! The one way the rate discipline locks its state.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex whose data is consistent wherever a panic could occur, ignoring poisoning.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
