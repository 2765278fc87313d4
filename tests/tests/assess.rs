//! The assessment matrix (SPEC A1–A3): every case from real guardians and real receipts, each
//! its own test.

use std::fs;
use std::path::Path;

use refine_protocol::record::Registration;
use refine_protocol::{BootId, DecodeError, Receipt, RuntimeId};
use refine_supervisor::end::assess::{
    assess, Assessment, BoundField, ExitProof, FixedBoot, UnverifiedReason, KERNEL_BOOT,
};
use refine_supervisor::end::stop::{self, StopOptions, StopOutcome};
use refine_supervisor::kernel::signal::{Signal, Verified};
use refine_supervisor::store::registry::Runtime;
use refine_tests::stopkit::*;
use refine_tests::wait_until;

const TREE_BUILDER: &str = env!("CARGO_BIN_EXE_tree-builder");

fn tree_builder() -> &'static Path {
    Path::new(TREE_BUILDER)
}

/// A scope that ran to completion: its guardian wrote a receipt and was reaped.
fn finished(rt: &Runtime) -> Registration {
    let mut scope = launch_guardian(rt, tree_builder(), &["--sessions", "0", "--then", "exit"]);
    scope.wait_ready();
    assert!(scope.reap().success());
    scope.reg.clone()
}

/// A running scope (a few idle processes).
fn running_scope(rt: &Runtime) -> GuardianScope {
    let mut scope = launch_guardian(
        rt,
        tree_builder(),
        &["--sessions", "1", "--groups", "1", "--leaves", "2"],
    );
    scope.wait_ready();
    scope
}

fn cleanup(rt: &Runtime, mut scope: GuardianScope) {
    let before = scope.members();
    let report = stop::stop(rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    scope.reap();
    assert!(survivors(&before).is_empty());
}

fn unverified(a: Assessment) -> UnverifiedReason {
    match a {
        Assessment::Unverified { reason } => reason,
        other => panic!("expected unverified, got {other:?}"),
    }
}

fn receipt_of(reg: &Registration) -> Receipt {
    Receipt::decode(&fs::read(&reg.proof_path).unwrap()).expect("receipt")
}

#[test]
fn valid_receipt_is_exited() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let a = assess(&rt, &reg, &KERNEL_BOOT);
    let r = a.receipt().expect("exited by receipt");
    assert_eq!(r.registration, reg.id);
    assert_eq!(r.workload, reg.hello.workload);
    assert_eq!(r.guardian, reg.hello.guardian);
}

#[test]
fn missing_proof_file_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    fs::remove_file(&reg.proof_path).unwrap();
    assert_eq!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::ProofMissing
    );
}

#[test]
fn truncated_receipt_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let bytes = fs::read(&reg.proof_path).unwrap();
    refine_tests::overwrite_in_place(&reg.proof_path, &bytes[..100]);
    assert!(matches!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::ReceiptCorrupt {
            error: DecodeError::Truncated { .. }
        }
    ));
}

#[test]
fn one_flipped_byte_is_unverified_and_each_call_recomputes() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let good = fs::read(&reg.proof_path).unwrap();
    let mut bad = good.clone();
    bad[70] ^= 0x01;
    refine_tests::overwrite_in_place(&reg.proof_path, &bad);
    assert!(matches!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::ReceiptCorrupt {
            error: DecodeError::BadChecksum { .. }
        }
    ));
    // No cached verdict: restoring the evidence restores the answer.
    refine_tests::overwrite_in_place(&reg.proof_path, &good);
    assert!(assess(&rt, &reg, &KERNEL_BOOT).is_exited());
}

#[test]
fn proof_file_replaced_by_a_copy_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let copy = format!("{}.copy", reg.proof_path);
    fs::copy(&reg.proof_path, &copy).unwrap();
    fs::rename(&copy, &reg.proof_path).unwrap();
    match unverified(assess(&rt, &reg, &KERNEL_BOOT)) {
        UnverifiedReason::ProofReplaced { registered, found } => {
            assert_eq!(registered, reg.hello.proof);
            assert_ne!(found.ino, registered.ino);
        }
        other => panic!("expected proof replaced, got {other:?}"),
    }
}

#[test]
fn a_symlink_or_a_fifo_at_the_proof_path_is_a_replacement_and_never_blocks() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    // A symbolic link to the real proof file is not the registered file.
    let moved = format!("{}.moved", reg.proof_path);
    fs::rename(&reg.proof_path, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &reg.proof_path).unwrap();
    assert!(matches!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::ProofReplaced { .. }
    ));
    // A FIFO with no writer: checking it must not wait for one.
    fs::remove_file(&reg.proof_path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        reg.proof_path.as_str(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(matches!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::ProofReplaced { .. }
    ));
    // The real file back in place: exited again.
    fs::remove_file(&reg.proof_path).unwrap();
    fs::rename(&moved, &reg.proof_path).unwrap();
    assert!(assess(&rt, &reg, &KERNEL_BOOT).is_exited());
}

#[test]
fn receipt_of_another_registration_copied_in_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let a = finished(&rt);
    let b = finished(&rt);
    refine_tests::overwrite_in_place(&a.proof_path, &fs::read(&b.proof_path).unwrap());
    assert_eq!(
        unverified(assess(&rt, &a, &KERNEL_BOOT)),
        UnverifiedReason::FieldMismatch {
            field: BoundField::Registration
        }
    );
    assert!(assess(&rt, &b, &KERNEL_BOOT).is_exited());
}

#[test]
fn receipt_from_another_runtime_is_unverified() {
    let (home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let mut r = receipt_of(&reg);
    r.runtime = RuntimeId([0x42; 16]);
    refine_tests::overwrite_in_place(&reg.proof_path, &r.encode());
    assert_eq!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::FieldMismatch {
            field: BoundField::Runtime
        }
    );
    // The same receipt judged by another runtime directory does not verify either.
    let other = Runtime::open(home.path(), 7999).unwrap();
    assert!(!assess(&other, &reg, &KERNEL_BOOT).is_exited());
}

#[test]
fn wrong_workload_pid_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let mut reg = finished(&rt);
    reg.hello.workload.pid += 1;
    assert_eq!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::FieldMismatch {
            field: BoundField::Workload
        }
    );
}

#[test]
fn guardian_sigkilled_without_receipt_is_unverified() {
    let (_home, rt) = home_and_runtime();
    let mut scope = running_scope(&rt);
    let before = scope.members();
    assert!(before.len() >= 4);
    Verified::open(scope.reg.hello.guardian)
        .unwrap()
        .signal(Signal::KILL)
        .unwrap();
    scope.reap();
    // What a started guardian leaves when killed: its zero reservation, which is no receipt.
    assert_eq!(
        fs::read(&scope.reg.proof_path).unwrap(),
        refine_protocol::receipt::RESERVED
    );
    assert_eq!(
        unverified(assess(&rt, &scope.reg, &KERNEL_BOOT)),
        UnverifiedReason::GuardianGoneWithoutReceipt
    );
    // The orphaned tree is still killed (verified witnesses: the workload and the owner
    // marker), but there is no proof: the registration stays unverified.
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::KilledUnverified, "{report:#?}");
    assert!(report.killed >= before.len(), "{report:#?}");
    assert!(
        wait_until(GENEROUS, || before.iter().all(|m| !running(&m.witness))),
        "survivors: {:#?}",
        survivors(&before)
    );
    assert_eq!(
        unverified(assess(&rt, &scope.reg, &KERNEL_BOOT)),
        UnverifiedReason::GuardianGoneWithoutReceipt
    );
}

#[test]
fn guardian_and_witnesses_from_an_earlier_boot_are_exited_and_never_signalled() {
    let (_home, rt) = home_and_runtime();
    let scope = running_scope(&rt);
    let later = FixedBoot(BootId([0x77; 16]));
    assert_eq!(
        assess(&rt, &scope.reg, &later),
        Assessment::Exited {
            proof: ExitProof::EarlierBoot {
                boot_id: scope.reg.hello.boot_id
            }
        }
    );
    // A stop under that boot signals nothing: the processes are not of this kernel lifetime.
    let before = scope.members();
    let opts = StopOptions {
        boot: &later,
        ..StopOptions::default()
    };
    let report = stop::stop(&rt, &scope.reg, &opts).expect("stop");
    assert_eq!(report.outcome, StopOutcome::AlreadyExited);
    assert!(report.signalled.is_empty());
    assert!(before.iter().all(|m| running(&m.witness)));
    cleanup(&rt, scope);
}

#[test]
fn mixed_boot_ids_are_unverified() {
    let (_home, rt) = home_and_runtime();
    let reg = finished(&rt);
    let mut r = receipt_of(&reg);
    r.boot_id = BootId([0x33; 16]);
    refine_tests::overwrite_in_place(&reg.proof_path, &r.encode());
    let later = FixedBoot(BootId([0x77; 16]));
    assert!(matches!(
        unverified(assess(&rt, &reg, &later)),
        UnverifiedReason::MixedBootIds { .. }
    ));
}

#[test]
fn missing_boot_id_is_unverified_and_never_signalled() {
    let (_home, rt) = home_and_runtime();
    let scope = running_scope(&rt);
    let mut reg = scope.reg.clone();
    reg.hello.boot_id = BootId::default();
    assert_eq!(
        unverified(assess(&rt, &reg, &KERNEL_BOOT)),
        UnverifiedReason::BootIdMissing
    );
    let before = scope.members();
    let report = stop::stop(&rt, &reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::NotSignalled);
    assert!(report.signalled.is_empty());
    assert!(before.iter().all(|m| running(&m.witness)));
    cleanup(&rt, scope);
}

#[test]
fn guardian_alive_is_live() {
    let (_home, rt) = home_and_runtime();
    let scope = running_scope(&rt);
    assert_eq!(assess(&rt, &scope.reg, &KERNEL_BOOT), Assessment::Live);
    // The proof file exists and holds no receipt while the guardian runs.
    assert!(refine_protocol::is_unwritten(
        &fs::read(&scope.reg.proof_path).unwrap()
    ));
    cleanup(&rt, scope);
}
