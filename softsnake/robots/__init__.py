"""The robots built on the engine: the soft snake (``softsnake.robots.snake``) and the vine robot
(``softsnake.robots.vine``), with what they share: the pneumatic chamber latency model
(``actuation``) and the lookup of their shipped parameter files and scenes (``assets``).

Neither robot package imports the other, and neither needs usd-core until a USD file is written.
"""
