//! One row of the footprint bench's table: Ferrite's value and the reference's per round,
//! printed as medians and the ratio's min / median / max against the goal.

/// One figure: Ferrite's value and the reference's, per round.
pub struct Row {
    pub name: &'static str,
    pub unit: &'static str,
    /// Shown values are multiplied by this (seconds as milliseconds, kB as MB…).
    pub scale: f64,
    pub ferrite: Vec<f64>,
    pub reference: Vec<f64>,
    /// The goal for Ferrite / reference, or for Ferrite's own value when `absolute`.
    pub goal: Option<f64>,
    pub absolute: bool,
}

impl Row {
    pub fn new(name: &'static str, unit: &'static str, scale: f64, goal: Option<f64>) -> Row {
        Row {
            name,
            unit,
            scale,
            ferrite: Vec::new(),
            reference: Vec::new(),
            goal,
            absolute: false,
        }
    }

    pub fn push(&mut self, ferrite: f64, reference: f64) {
        self.ferrite.push(ferrite);
        self.reference.push(reference);
    }

    pub fn print(&self) {
        let mut f = self.ferrite.clone();
        let mut r = self.reference.clone();
        if f.is_empty() {
            return;
        }
        let mut ratios: Vec<f64> = self
            .ferrite
            .iter()
            .zip(&self.reference)
            .map(|(a, b)| if self.absolute { *a } else { a / b })
            .collect();
        let (fm, rm) = (median(&mut f), median(&mut r));
        let med = median(&mut ratios);
        let (lo, hi) = (ratios[0], ratios[ratios.len() - 1]);
        let goal = match self.goal {
            Some(g) if self.absolute => format!(
                "<= {:.0} {}  {}",
                g * self.scale,
                self.unit,
                if med <= g { "met" } else { "NOT met" }
            ),
            Some(g) => format!("<= {g:.2}  {}", if med <= g { "met" } else { "NOT met" }),
            None => String::new(),
        };
        if self.absolute {
            println!(
                "{:<58} {:>10.2} {:<3} {:>10} {:>24}   {goal}",
                self.name,
                fm * self.scale,
                self.unit,
                "",
                format!(
                    "{:.2} / {:.2} / {:.2} {}",
                    lo * self.scale,
                    med * self.scale,
                    hi * self.scale,
                    self.unit
                ),
            );
        } else {
            println!(
                "{:<58} {:>10.2} {:<3} {:>10.2} {:>24}   {goal}",
                self.name,
                fm * self.scale,
                self.unit,
                rm * self.scale,
                format!("{lo:.3} / {med:.3} / {hi:.3}"),
            );
        }
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
