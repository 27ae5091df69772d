"""Restoring a lost workspace from a backup on another node (``run:scale-out``): :mod:`.driver` runs
the steps of ``almanac workspace restore``; :mod:`.endpoints` is the target node's side of them."""
