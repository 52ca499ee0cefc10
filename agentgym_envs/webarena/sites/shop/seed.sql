-- Loopback Market: the embedded shop's hand-written core: the first products, reviews and orders, the
-- customer, the cart. `catalog.py` adds the generated rest (hundreds of products, reviews and orders, the
-- address book and the wish list). Prices are in cents. Restored on every reset.

CREATE TABLE categories (slug TEXT PRIMARY KEY, name TEXT NOT NULL, position INTEGER NOT NULL);
CREATE TABLE products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL REFERENCES categories(slug),
    price INTEGER NOT NULL,
    stock INTEGER NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL REFERENCES products(sku),
    author TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    posted TEXT NOT NULL
);
CREATE TABLE addresses (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    zip TEXT NOT NULL
);
CREATE INDEX reviews_by_sku ON reviews(sku);
CREATE TABLE customer (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    default_address INTEGER NOT NULL REFERENCES addresses(id)
);
CREATE TABLE wishlist (sku TEXT PRIMARY KEY REFERENCES products(sku), added TEXT NOT NULL, position INTEGER NOT NULL);
CREATE TABLE cart (sku TEXT PRIMARY KEY REFERENCES products(sku), qty INTEGER NOT NULL CHECK (qty BETWEEN 1 AND 999), position INTEGER NOT NULL);
CREATE TABLE orders (
    number INTEGER PRIMARY KEY,
    placed TEXT NOT NULL,
    status TEXT NOT NULL,
    shipping_method TEXT NOT NULL,
    shipping INTEGER NOT NULL,
    ship_name TEXT NOT NULL,
    ship_street TEXT NOT NULL,
    ship_city TEXT NOT NULL,
    ship_zip TEXT NOT NULL
);
CREATE TABLE order_items (
    order_number INTEGER NOT NULL REFERENCES orders(number),
    sku TEXT NOT NULL REFERENCES products(sku),
    name TEXT NOT NULL,
    price INTEGER NOT NULL,
    qty INTEGER NOT NULL,
    PRIMARY KEY (order_number, sku)
);

INSERT INTO categories VALUES
    ('electronics', 'Electronics', 1),
    ('kitchen', 'Kitchen', 2),
    ('outdoor', 'Outdoor', 3),
    ('office', 'Office', 4),
    ('home', 'Home', 5),
    ('garden', 'Garden', 6),
    ('sports', 'Sports', 7),
    ('toys', 'Toys', 8),
    ('beauty', 'Beauty', 9);

INSERT INTO products VALUES
    ('EL-1001', 'Nimbus Wireless Mouse', 'electronics', 2499, 40, 'A quiet two-button mouse with a scroll wheel and a 12-month battery.'),
    ('EL-1002', 'Nimbus Wireless Keyboard', 'electronics', 4999, 25, 'Full-size keyboard with low-profile keys; pairs with the Nimbus mouse.'),
    ('EL-1003', 'Pulse Bluetooth Speaker', 'electronics', 5900, 12, 'Water-resistant speaker with 20 hours of playback.'),
    ('EL-1004', 'Pulse Mini Bluetooth Speaker', 'electronics', 2950, 30, 'Pocket-sized speaker with a clip and 8 hours of playback.'),
    ('EL-1005', 'Volt USB-C Charger 65W', 'electronics', 3999, 18, 'Fast charger for laptops and phones, with a foldable plug.'),
    ('EL-1006', 'Volt USB-C Cable 2 m', 'electronics', 999, 100, 'Braided USB-C to USB-C cable rated for 100 W.'),
    ('EL-1007', 'Echo Noise-Cancelling Headphones', 'electronics', 12900, 7, 'Over-ear headphones with active noise cancelling and a travel case.'),
    ('KI-2001', 'Bamboo Cutting Board', 'kitchen', 1875, 22, 'Large bamboo board with a juice groove.'),
    ('KI-2002', 'Cast Iron Skillet 10 in', 'kitchen', 3200, 15, 'Pre-seasoned skillet for stove, oven and campfire.'),
    ('KI-2003', 'Ceramic Coffee Mug Set (4)', 'kitchen', 2240, 20, 'Four stoneware mugs, dishwasher safe.'),
    ('KI-2004', 'Stainless Steel Kettle', 'kitchen', 4490, 9, 'A 1.7 litre electric kettle with automatic shut-off.'),
    ('KI-2005', 'Silicone Spatula Set', 'kitchen', 1230, 35, 'Three heat-resistant spatulas in different sizes.'),
    ('KI-2006', 'Chef''s Knife 8 in', 'kitchen', 5800, 11, 'Forged stainless steel knife with a full tang.'),
    ('OU-3001', 'Trailblazer Water Bottle', 'outdoor', 1699, 60, 'Insulated steel bottle that keeps drinks cold for 24 hours.'),
    ('OU-3002', 'Trailhead 2-Person Tent', 'outdoor', 14900, 6, 'Lightweight tent that sets up in five minutes.'),
    ('OU-3003', 'Summit Hiking Backpack 30 L', 'outdoor', 8995, 14, 'Day pack with a rain cover and a hydration sleeve.'),
    ('OU-3004', 'Campfire Folding Chair', 'outdoor', 3450, 19, 'Folding chair with a cup holder and a carry bag.'),
    ('OU-3005', 'Headlamp 300 Lumens', 'outdoor', 1995, 45, 'Rechargeable headlamp with a red night mode.'),
    ('OU-3006', 'Insulated Sleeping Bag', 'outdoor', 7400, 10, 'Three-season sleeping bag rated to -5 C.'),
    ('OF-4001', 'Aurora Desk Lamp', 'office', 3499, 27, 'LED desk lamp with three colour temperatures and a USB port.'),
    ('OF-4002', 'Ergonomic Office Chair', 'office', 21900, 5, 'Mesh chair with lumbar support and adjustable arms.'),
    ('OF-4003', 'Spiral Notebook A5 (3 pack)', 'office', 849, 80, 'Three ruled notebooks with 120 pages each.'),
    ('OF-4004', 'Gel Pen Set (12)', 'office', 1125, 50, 'Twelve colours of smooth gel ink.'),
    ('OF-4005', 'Monitor Stand Riser', 'office', 2780, 16, 'Wooden riser with a drawer for small items.'),
    ('HO-5001', 'Linen Throw Blanket', 'home', 4200, 13, 'Soft washed-linen blanket, 130 by 170 cm.'),
    ('HO-5002', 'Scented Soy Candle', 'home', 1460, 33, 'Cedar and vanilla candle that burns for 40 hours.'),
    ('HO-5003', 'Cotton Bath Towel Set', 'home', 3675, 21, 'Two bath towels and two hand towels in organic cotton.'),
    ('HO-5004', 'Wall Clock 12 in', 'home', 2500, 17, 'Silent wall clock with a wooden frame.'),
    ('HO-5005', 'Ceramic Plant Pot', 'home', 1920, 24, 'Glazed pot with a drainage hole and a saucer.');

INSERT INTO reviews VALUES
    (1, 'EL-1001', 'Priya Natarajan', 4, 'Does the job', 'Quiet clicks and the battery lasts forever.', '2023-11-02'),
    (2, 'EL-1001', 'Tom Becker', 4, 'Good value', 'Comfortable for long days at the desk.', '2024-01-20'),
    (3, 'EL-1003', 'Sara Lind', 5, 'Great sound', 'Loud and clear, survived a rainy picnic.', '2024-02-11'),
    (4, 'EL-1007', 'Marco Ruiz', 3, 'Comfortable but pricey', 'Noise cancelling is good, not great.', '2024-03-08'),
    (5, 'KI-2002', 'Hannah Okafor', 5, 'Perfect sear', 'Heavy, but it cooks evenly.', '2023-12-15'),
    (6, 'KI-2005', 'Luis Moreno', 2, 'Too soft', 'The small spatula bends too much.', '2024-02-02'),
    (7, 'OU-3001', 'Emily Chen', 5, 'Cold all day', 'Ice lasted through an afternoon in the sun.', '2024-01-05'),
    (8, 'OU-3001', 'Jordan Lee', 4, 'Nice bottle', 'Keeps drinks cold; the lid is a bit stiff.', '2024-03-21'),
    (9, 'OU-3002', 'Ava Thompson', 5, 'Easy setup', 'Pitched it in the dark in five minutes.', '2024-01-28'),
    (10, 'OU-3002', 'Noah Williams', 4, 'Roomy for two', 'Stayed dry in a storm; a little heavy.', '2024-02-19'),
    (11, 'OU-3002', 'Jordan Lee', 4, 'Solid tent', 'Good ventilation, the poles feel sturdy.', '2024-04-03'),
    (12, 'OF-4001', 'Grace Kim', 5, 'Lovely light', 'Warm light for reading and a handy USB port.', '2024-03-30'),
    (13, 'OF-4002', 'Daniel Park', 4, 'My back thanks me', 'Took 30 minutes to assemble.', '2024-02-25'),
    (14, 'HO-5002', 'Olivia Brown', 5, 'Smells wonderful', 'Burns evenly and fills the room.', '2024-01-12');

INSERT INTO addresses VALUES (1, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412');
INSERT INTO customer VALUES (1, 'Alex Morgan', 'alex.morgan@example.com', 1);

INSERT INTO cart VALUES ('KI-2001', 1, 1);

INSERT INTO orders VALUES
    (1001, '2024-01-14', 'Complete', 'Standard', 500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1002, '2024-02-03', 'Complete', 'Standard', 500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1003, '2024-02-27', 'Canceled', 'Standard', 500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1004, '2024-03-19', 'Shipped', 'Express', 1500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1005, '2024-04-02', 'Pending', 'Standard', 500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1006, '2024-04-10', 'Canceled', 'Express', 1500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412'),
    (1007, '2024-04-21', 'Pending', 'Standard', 500, 'Alex Morgan', '42 Elm Street', 'Riverton', '30412');

INSERT INTO order_items VALUES
    (1001, 'EL-1001', 'Nimbus Wireless Mouse', 2499, 1),
    (1001, 'EL-1006', 'Volt USB-C Cable 2 m', 999, 2),
    (1002, 'OU-3002', 'Trailhead 2-Person Tent', 14900, 1),
    (1002, 'OU-3005', 'Headlamp 300 Lumens', 1995, 2),
    (1003, 'KI-2002', 'Cast Iron Skillet 10 in', 3200, 1),
    (1003, 'KI-2005', 'Silicone Spatula Set', 1230, 1),
    (1004, 'OF-4002', 'Ergonomic Office Chair', 21900, 1),
    (1005, 'KI-2003', 'Ceramic Coffee Mug Set (4)', 2240, 1),
    (1005, 'HO-5002', 'Scented Soy Candle', 1460, 3),
    (1006, 'EL-1003', 'Pulse Bluetooth Speaker', 5900, 1),
    (1007, 'HO-5001', 'Linen Throw Blanket', 4200, 1),
    (1007, 'HO-5004', 'Wall Clock 12 in', 2500, 1);
