//! The sharing switches (Ascend `container-share`, Cambricon `smlu-mode`, see
//! [`SharingSwitch`]): read; where a switch is off and this is not a dry run, switch it on to see
//! that it takes, keep it on while the card's own checks run (as an allocation would), and put
//! it back off afterwards whatever those checks did. The row's depth is `declared`: the driver
//! answered. Decisions only; the switch does the IO.

use gpustack_api::devices::Accelerator;

use super::report::{Check, Depth, Mode, State};
use crate::vendors::SharingSwitch;

/// The switch's row, a warning when it could not be put back, and what `during` returned.
pub struct Toggled<T> {
    pub row: Check,
    pub warning: Option<String>,
    pub during: T,
}

/// Runs `during` (the card's other checks) with the switch on where it can be turned on; see
/// the module comment. A dry run only reads.
pub fn around<T>(
    switch: &dyn SharingSwitch,
    a: &Accelerator,
    dry_run: bool,
    during: impl FnOnce() -> T,
) -> Toggled<T> {
    let cap = switch.capability();
    let row = |state| Check::new(&a.id, cap, Mode::Sliced, state, Depth::Declared);
    let done = |row, during| Toggled {
        row,
        warning: None,
        during,
    };
    match switch.is_on(a) {
        Err(e) => {
            return done(
                row(State::Unavailable).reason(format!(
                    "the driver did not say whether {cap} is on: {e}; a slice allocation needs it on"
                )),
                during(),
            );
        }
        Ok(true) => {
            return done(
                row(State::Ok).detail(format!("{cap} is on already; left as it is")),
                during(),
            );
        }
        Ok(false) if dry_run => {
            return done(
                row(State::Ok).detail(format!(
                    "{cap} is off; not switched in a dry run (a run switches it on, checks that it took and puts it back off; by hand: {}, then {}); an allocation switches it on",
                    switch.by_hand(a, true),
                    switch.by_hand(a, false)
                )),
                during(),
            );
        }
        Ok(false) => {}
    }

    let took = switch.set(a, true).and_then(|()| switch.is_on(a));
    let during = during();
    // Put back whatever reads other than off (a refused switch-on left nothing to undo).
    let put_back = match switch.is_on(a) {
        Ok(false) => Ok(()),
        _ => match switch.set(a, false).and_then(|()| switch.is_on(a)) {
            Ok(false) => Ok(()),
            Ok(true) => Err("it still reads on after switching it off".to_owned()),
            Err(e) => Err(e.to_string()),
        },
    };
    let warning = put_back.as_ref().err().map(|why| {
        format!(
            "{cap} on {} was left ON: {why}; put it back by hand: {}",
            a.id,
            switch.by_hand(a, false)
        )
    });
    let refused = |why: String| {
        row(State::Unavailable).reason(format!(
            "{cap} is off and {why}: a slice allocation, which switches it on, would be refused"
        ))
    };
    let mut r = match took {
        Ok(true) => row(State::Ok).detail(format!(
            "{cap} was off: switched on (it reads back on) for this card's checks, then put back off"
        )),
        Ok(false) => refused("did not take when switched on (it still reads off)".into()),
        Err(e) => refused(format!("could not be switched on: {e}")),
    };
    if let Err(why) = &put_back {
        let note = format!("putting it back off failed: {why}");
        r.detail = Some(match r.detail.take() {
            Some(d) => format!("{d}; {note}"),
            None => note,
        });
    }
    Toggled {
        row: r,
        warning,
        during,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::vendors::SwitchError;

    /// A switch in memory: its state, a log of what was asked of it, and calls that fail.
    struct Memory {
        on: RefCell<bool>,
        log: RefCell<Vec<String>>,
        refuse_on: bool,
        refuse_off: bool,
        ignore_on: bool,
        unreadable: bool,
    }

    impl Memory {
        fn off() -> Self {
            Self {
                on: RefCell::new(false),
                log: RefCell::default(),
                refuse_on: false,
                refuse_off: false,
                ignore_on: false,
                unreadable: false,
            }
        }
    }

    impl SharingSwitch for Memory {
        fn capability(&self) -> &'static str {
            "container-share"
        }
        fn by_hand(&self, _: &Accelerator, on: bool) -> String {
            format!("switch {on}")
        }
        fn is_on(&self, _: &Accelerator) -> Result<bool, SwitchError> {
            if self.unreadable {
                return Err(SwitchError::Call("get returned -8255".into()));
            }
            Ok(*self.on.borrow())
        }
        fn set(&self, _: &Accelerator, on: bool) -> Result<(), SwitchError> {
            self.log.borrow_mut().push(format!("set {on}"));
            if (on && self.refuse_on) || (!on && self.refuse_off) {
                return Err(SwitchError::Call("set returned -8002".into()));
            }
            if !(on && self.ignore_on) {
                *self.on.borrow_mut() = on;
            }
            Ok(())
        }
    }

    fn card() -> Accelerator {
        Accelerator {
            id: "npu-0".into(),
            ..Default::default()
        }
    }

    #[test]
    fn off_is_switched_on_for_the_checks_and_put_back() {
        let s = Memory::off();
        let t = around(&s, &card(), false, || *s.on.borrow());
        assert!(t.during, "the card's checks run with the switch on");
        assert_eq!((t.row.state, t.row.depth), (State::Ok, Depth::Declared));
        assert!(!*s.on.borrow());
        assert_eq!(*s.log.borrow(), ["set true", "set false"]);
        assert!(t.warning.is_none());
    }

    #[test]
    fn on_already_is_left_alone_and_a_dry_run_only_reads() {
        let s = Memory::off();
        *s.on.borrow_mut() = true;
        let t = around(&s, &card(), false, || ());
        assert_eq!(t.row.state, State::Ok);
        assert!(s.log.borrow().is_empty());

        let s = Memory::off();
        let t = around(&s, &card(), true, || *s.on.borrow());
        assert!(!t.during);
        assert_eq!(t.row.state, State::Ok);
        assert!(t.row.detail.unwrap().contains("switch true"));
        assert!(s.log.borrow().is_empty(), "a dry run changes nothing");
    }

    #[test]
    fn a_switch_that_refuses_or_does_not_take_is_unavailable_and_still_put_back() {
        let s = Memory {
            refuse_on: true,
            ..Memory::off()
        };
        let t = around(&s, &card(), false, || ());
        assert_eq!(t.row.state, State::Unavailable);
        assert!(t.row.reason.unwrap().contains("-8002"));
        assert_eq!(*s.log.borrow(), ["set true"], "nothing to put back");
        assert!(t.warning.is_none());

        let s = Memory {
            ignore_on: true,
            ..Memory::off()
        };
        let t = around(&s, &card(), false, || ());
        assert_eq!(t.row.state, State::Unavailable);
        assert!(t.row.reason.unwrap().contains("did not take"));

        let s = Memory {
            unreadable: true,
            ..Memory::off()
        };
        let t = around(&s, &card(), false, || ());
        assert_eq!(t.row.state, State::Unavailable);
        assert!(s.log.borrow().is_empty());
    }

    #[test]
    fn a_switch_left_on_is_a_warning_naming_the_way_back() {
        let s = Memory {
            refuse_off: true,
            ..Memory::off()
        };
        let t = around(&s, &card(), false, || ());
        assert_eq!(t.row.state, State::Ok, "it took");
        let w = t.warning.unwrap();
        assert!(w.contains("left ON") && w.contains("switch false"), "{w}");
        assert!(t.row.detail.unwrap().contains("putting it back off failed"));
    }
}
