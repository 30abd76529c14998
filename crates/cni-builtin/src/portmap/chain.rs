//! What the Go plugin's `chain.go` does with a chain (`setup`, `teardown`, `check`), as lines of
//! one `iptables-restore --noflush` script and checks against one `iptables-save -t nat`.
//!
//! Every rule is kept twice: the arguments the Go plugin passes to iptables (its error messages
//! print them) and the rule as `iptables-save` prints it, which is what the table read before
//! the script is compared with and what the script writes, so that either plugin finds, and
//! removes, what the other made.

use std::fmt::Write as _;

use crate::ipmasq::NatTable;

/// One rule: Go's arguments, and the rule as saved (what follows `-A <chain> `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) args: Vec<String>,
    pub(crate) saved: String,
}

impl Rule {
    pub(crate) fn new(args: &[&str], saved: String) -> Rule {
        Rule {
            args: args.iter().map(|&a| a.to_owned()).collect(),
            saved,
        }
    }
}

/// A chain of the nat table, with the rules that enter it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) name: String,
    pub(crate) entry_chains: Vec<String>,
    pub(crate) entry_rules: Vec<Rule>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) prepend_entry: bool,
}

impl Chain {
    /// The saved line of an entry rule in `entry`.
    fn entry_line(&self, entry: &str, rule: &Rule) -> String {
        format!("-A {entry} {} -j {}", rule.saved, self.name)
    }

    /// `chain.setup`: the chain when missing, each rule and entry rule when not there yet;
    /// `table` follows the script so later steps see what earlier ones add.
    pub(crate) fn setup(&self, table: &mut NatTable, script: &mut String) {
        if !table.chains.contains(&self.name) {
            // Not `:name - [0:0]`, which flushes a chain someone made since the table was
            // read; `-N` fails instead, and the whole script with it.
            let _ = writeln!(script, "-N {}", self.name);
            table.chains.push(self.name.clone());
        }
        for rule in &self.rules {
            let line = format!("-A {} {}", self.name, rule.saved);
            if !table.rules.contains(&line) {
                let _ = writeln!(script, "{line}");
                table.rules.push(line);
            }
        }
        for entry in &self.entry_chains {
            for rule in &self.entry_rules {
                let line = self.entry_line(entry, rule);
                if table.rules.contains(&line) {
                    continue;
                }
                if self.prepend_entry {
                    let _ = writeln!(script, "{}", line.replacen("-A ", "-I ", 1));
                    table.rules.insert(0, line);
                } else {
                    let _ = writeln!(script, "{line}");
                    table.rules.push(line);
                }
            }
        }
    }

    /// `chain.teardown`: the chain flushed, every rule of an entry chain that jumps to it
    /// deleted, the chain deleted; nothing for what is already gone.
    pub(crate) fn teardown(&self, table: &mut NatTable, script: &mut String) {
        let exists = table.chains.contains(&self.name);
        if exists {
            let _ = writeln!(script, "-F {}", self.name);
            let own = format!("-A {} ", self.name);
            table.rules.retain(|r| !r.starts_with(&own));
        }
        let jump = format!("-j {}", self.name);
        for entry in &self.entry_chains {
            let prefix = format!("-A {entry} ");
            table.rules.retain(|r| {
                let goes = r.starts_with(&prefix) && r.ends_with(&jump);
                if goes {
                    let _ = writeln!(script, "{}", r.replacen("-A ", "-D ", 1));
                }
                !goes
            });
        }
        if exists {
            let _ = writeln!(script, "-X {}", self.name);
            table.chains.retain(|c| c != &self.name);
        }
    }

    /// `chain.check`: the chain, every rule, every entry rule; Go's messages.
    pub(crate) fn check(&self, table: &NatTable) -> Result<(), String> {
        if !table.chains.contains(&self.name) {
            return Err(format!(
                "chain {} not found in iptables table nat",
                self.name
            ));
        }
        for rule in self.rules.iter().rev() {
            if !table
                .rules
                .contains(&format!("-A {} {}", self.name, rule.saved))
            {
                return Err(format!(
                    "rule {} in chain {} not found in table nat",
                    go_lists(&self.rules),
                    self.name
                ));
            }
        }
        for entry in &self.entry_chains {
            for rule in self.entry_rules.iter().rev() {
                if !table.rules.contains(&self.entry_line(entry, rule)) {
                    return Err(format!(
                        "rule {} in chain {entry} not found in table nat",
                        go_lists(&self.entry_rules)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Go's `%s` of a `[][]string`.
fn go_lists(rules: &[Rule]) -> String {
    let inner: Vec<String> = rules
        .iter()
        .map(|r| format!("[{}]", r.args.join(" ")))
        .collect();
    format!("[{}]", inner.join(" "))
}
