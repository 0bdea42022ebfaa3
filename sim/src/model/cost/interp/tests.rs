//! Interpolation hits measured points exactly, blends in log space and flags clamping.

use proptest::prelude::*;

use super::*;

#[test]
fn curve_returns_measured_points_and_blends_between_them() {
    let curve = Curve::new(vec![(1024.0, 20.0), (8.0, 10.0)]).unwrap();
    assert_eq!(
        curve.at(8.0),
        Lookup {
            value_us: 10.0,
            out_of_range: false
        }
    );
    assert_eq!(curve.at(1024.0).value_us, 20.0);
    // 90.5 is the geometric midpoint of 8 and 1024, so log-space interpolation gives the mean.
    assert!((curve.at(90.50966799187809).value_us - 15.0).abs() < 1e-9);
    assert_eq!(
        curve.at(4.0),
        Lookup {
            value_us: 10.0,
            out_of_range: true
        }
    );
    assert_eq!(
        curve.at(1e6),
        Lookup {
            value_us: 20.0,
            out_of_range: true
        }
    );
}

#[test]
fn grid_is_bilinear_and_rejects_holes() {
    let grid = Grid::new(&[
        (1.0, 1.0, 1.0),
        (1.0, 100.0, 3.0),
        (100.0, 1.0, 5.0),
        (100.0, 100.0, 7.0),
    ])
    .unwrap();
    assert!((grid.at(10.0, 10.0).value_us - 4.0).abs() < 1e-9);
    assert!(grid.at(1000.0, 10.0).out_of_range);
    assert_eq!(
        Grid::new(&[(1.0, 1.0, 1.0), (2.0, 2.0, 1.0)]),
        Err(InterpError::NotAGrid {
            points: 2,
            nx: 2,
            ny: 2
        })
    );
    assert!(matches!(
        Curve::new(vec![(3.0, 1.0), (3.0, 2.0)]),
        Err(InterpError::DuplicateCoordinate(_))
    ));
}

proptest! {
    #[test]
    fn curve_stays_within_the_measured_values(
        points in proptest::collection::btree_map(1u32..100_000, 0.0f64..1e4, 1..12),
        x in 0.0f64..1e6,
    ) {
        let pairs: Vec<(f64, f64)> = points.iter().map(|(k, v)| (f64::from(*k), *v)).collect();
        let curve = Curve::new(pairs.clone()).unwrap();
        let lo = pairs.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = pairs.iter().map(|p| p.1).fold(0.0, f64::max);
        let v = curve.at(x).value_us;
        prop_assert!(v >= lo - 1e-9 && v <= hi + 1e-9);
    }
}

#[test]
fn slope_is_per_unit_of_the_coordinate() {
    let curve = Curve::new(vec![(1.0, 10.0), (101.0, 60.0)]).unwrap();
    let slope = curve.slope_per_unit().unwrap();
    assert!((slope - 0.5).abs() < 1e-12, "{slope}");
    assert_eq!(
        Curve::new(vec![(1.0, 10.0)]).unwrap().slope_per_unit(),
        None
    );
}
