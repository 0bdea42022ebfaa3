//! `afd-conformance`: the invariant catalog and live checks for an Attention+FFN pair, and `afd-twin`.
