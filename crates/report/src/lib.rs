//! Renderers of runs: folded stacks, pprof, HTML.
