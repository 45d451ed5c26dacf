"""Course tooling (export, posts, site): run by `make`, never imported by a notebook."""
