/** The order as the domain sees it. The HTTP schema (shared/orders/orderRequest.ts) validates input. */
export interface OrderItem {
  sku: string;
  quantity: number;
  unitPrice: number;
}

export interface ShippingAddress {
  name: string;
  line1: string;
  line2?: string;
  city: string;
  postalCode: string;
  country: string;
}

export interface Order {
  orderId: string;
  customerId: string;
  items: OrderItem[];
  shippingAddress: ShippingAddress;
  /** Hash of the submitted body, so a retried POST with another body under the same key is caught. */
  requestHash?: string;
  createdAt: Date;
}
