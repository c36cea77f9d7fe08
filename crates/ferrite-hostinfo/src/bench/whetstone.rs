//! The double-precision Whetstone benchmark behind `p_fpops`.
//!
//! Whetstone (Curnow and Wichmann, 1976) times eight modules whose mix of statements was
//! chosen from measurements of scientific programs: array arithmetic, an array passed to a
//! procedure, conditional jumps, integer arithmetic, trigonometric functions, procedure
//! calls, array references and standard functions. One *pass* runs all eight with the loop
//! counts of Longbottom's C edition at `x100 = 1000`, which that edition rates at
//! 100 × x100 thousand Whetstone instructions; the official client runs whole passes until
//! its time is up and reports instructions per second of the thread's own CPU time as
//! `p_fpops`. Ferrite runs the same modules with the same counts and the same rating, so
//! the figure means the same thing to a project server.
//!
//! Each module ends by storing a value where the optimiser cannot see it
//! ([`std::hint::black_box`], as the original stores into an external array), so no module
//! is folded away; within a module the optimiser is free, as it is for the official build.

use std::hint::black_box;

/// Loop multiplier of Longbottom's C edition at the official client's setting.
const X100: usize = 1000;

/// Whetstone instructions credited for one pass: 100 × x100 thousand.
pub(crate) const INSTRUCTIONS_PER_PASS: u64 = 100 * X100 as u64 * 1000;

const T: f64 = 0.499_999_75;
const T1: f64 = 0.500_000_25;
const T2: f64 = 2.0;

/// Module 2's procedure: six rounds of module 1's statements on an array passed in.
fn pa(e: &mut [f64; 4], t: f64, t2: f64) {
    for _ in 0..6 {
        e[0] = (e[0] + e[1] + e[2] - e[3]) * t;
        e[1] = (e[0] + e[1] - e[2] + e[3]) * t;
        e[2] = (e[0] - e[1] + e[2] + e[3]) * t;
        e[3] = (-e[0] + e[1] + e[2] + e[3]) / t2;
    }
}

/// Module 6's procedure: arithmetic through references.
fn p3(x: &mut f64, y: &mut f64, z: &mut f64, t: f64, t1: f64, t2: f64) {
    *x = *y;
    *y = *z;
    *x = t * (*x + *y);
    *y = t1 * (*x + *y);
    *z = (*x + *y) / t2;
}

/// Module 7's procedure: element moves inside an array.
fn po(e: &mut [f64; 4], j: usize, k: usize, l: usize) {
    e[j] = e[k];
    e[k] = e[l];
    e[l] = e[j];
}

/// Runs one pass of the eight modules. `one` must be 1 and come from outside the
/// optimiser's view (module 3's jumps branch on it).
pub(crate) fn pass(one: i64) {
    let (t, t1, t2) = (T, T1, T2);
    let (n1, n2, n3, n4) = (12 * X100, 14 * X100, 345 * X100, 210 * X100);
    let (n5, n6, n7, n8) = (32 * X100, 899 * X100, 616 * X100, 93 * X100);

    // Module 1: array elements.
    let mut e = [1.0, -1.0, -1.0, -1.0];
    for _ in 0..n1 * 10 {
        e[0] = (e[0] + e[1] + e[2] - e[3]) * t;
        e[1] = (e[0] + e[1] - e[2] + e[3]) * t;
        e[2] = (e[0] - e[1] + e[2] + e[3]) * t;
        e[3] = (-e[0] + e[1] + e[2] + e[3]) * t;
    }
    black_box(e);

    // Module 2: array as parameter.
    for _ in 0..n2 {
        pa(&mut e, t, t2);
    }
    black_box(e[0]);

    // Module 3: conditional jumps.
    let (mut j, mut k, mut l) = (one, one, 0i64);
    for _ in 0..n3 {
        l = if j == 1 { one } else { k };
        j = if k > 2 { one } else { 1 };
        k = if l < 1 { 1 } else { one };
    }
    black_box((j, l));

    // Module 4: integer arithmetic (wrapping, as the values are meaningless past a few
    // rounds and the C original's overflow is not an error there either).
    let mut j = e[0] as i64;
    let mut k = 2i64;
    let mut l = 3i64;
    for _ in 0..n4 {
        j = j
            .wrapping_mul(k.wrapping_sub(j))
            .wrapping_mul(l.wrapping_sub(k));
        k = l
            .wrapping_mul(k)
            .wrapping_sub(l.wrapping_sub(j).wrapping_mul(k));
        l = l.wrapping_sub(k).wrapping_mul(k.wrapping_add(j));
        e[(l & 3) as usize] = j.wrapping_add(k).wrapping_add(l) as f64;
        e[(k & 3) as usize] = j.wrapping_mul(k).wrapping_mul(l) as f64;
    }
    black_box(e[0]);

    // Module 5: trigonometric functions.
    let mut x = 0.5f64;
    let mut y = 0.5f64;
    for _ in 1..n5 {
        let (sx, cx) = x.sin_cos();
        x = t * (t2 * sx * cx / ((x + y).cos() + (x - y).cos() - 1.0)).atan();
        let (sy, cy) = y.sin_cos();
        y = t * (t2 * sy * cy / ((x + y).cos() + (x - y).cos() - 1.0)).atan();
    }
    black_box(x);

    // Module 6: procedure calls.
    let (mut x, mut y, mut z) = (1.0f64, 1.0f64, 1.0f64);
    for _ in 0..n6 {
        p3(&mut x, &mut y, &mut z, t, t1, t2);
    }
    black_box(x);

    // Module 7: array references.
    let mut e = [1.0, 2.0, 3.0, e[3]];
    for _ in 0..n7 {
        po(&mut e, 0, 1, 2);
    }
    black_box(e[0]);

    // Module 8: standard functions, x = sqrt(exp(ln(x) / t1)). The official client's
    // build lets its compiler apply algebra to floating point (`-ffast-math`), which turns
    // this into exp(ln(x) × 0.5 / t1): a logarithm, a multiplication and an exponential.
    // Ferrite writes the same identity out so that a pass does the same work.
    let mut x = 0.75f64;
    let half_over_t1 = 0.5 / t1;
    for _ in 0..n8 {
        x = (x.ln() * half_over_t1).exp();
    }
    black_box(x);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_is_rated_at_one_hundred_million_instructions() {
        assert_eq!(INSTRUCTIONS_PER_PASS, 100_000_000);
        // A pass completes (no module loops for ever on the values it produces).
        pass(1);
    }
}
