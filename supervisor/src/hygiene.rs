//! Watches on the node's processes: who holds a path, reaping by checkout, the stall watch.
//!
//! - [`holders`]: who holds a path.
//! - [`reap_checkout`]: reap by checkout.
//! - [`stall`]: the stall watch's state machine.

pub mod holders;
pub mod reap_checkout;
pub mod stall;
