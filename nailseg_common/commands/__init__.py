"""The commands a user runs: ``nailseg-predict``, ``nailseg-finetune`` and ``nailseg-train``
(also ``python -m nailseg_common.commands.<name>``). Each sizes itself from its options, without
a notebook's ``start()``."""
