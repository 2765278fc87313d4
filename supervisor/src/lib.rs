//! refine-supervisor: launches through the guardian, captures output, stops whole trees and
//! proves with the guardian's receipt that everything a command started has ended.
#![forbid(unsafe_code)]
