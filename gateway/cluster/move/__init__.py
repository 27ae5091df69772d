"""Moving a workspace to another node (``run:scale-out``): :mod:`.driver` runs the steps of
``almanac workspace move``; :mod:`.endpoints` is each node's side of them."""
