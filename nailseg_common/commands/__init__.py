"""The commands a user runs: ``nailseg-prepare``, ``nailseg-predict``, ``nailseg-finetune`` and
``nailseg-train`` (also ``python -m nailseg_common.commands.<name>``), their shared ``--checkpoint``
in ``command_line``. Each sizes itself from its options, without a notebook's ``start()``."""
