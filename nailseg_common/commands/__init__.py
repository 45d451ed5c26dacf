"""The commands a user runs: ``nailseg-prepare``, ``nailseg-predict``, ``nailseg-fine-tune``,
``nailseg-train`` and ``nailseg-bench`` (also ``python -m nailseg_common.commands.<name>``),
their shared options in ``command_line``. Each sizes itself from its options, without a
notebook's ``start()``."""
